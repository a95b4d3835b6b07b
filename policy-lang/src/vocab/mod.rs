//! The vocabulary every phase shares: subs, actions, values, types, variables, ids, operators, regexes.

mod connection;
pub(crate) mod hash;
mod ops;
pub(crate) mod pattern;
pub(crate) mod regex;
pub(crate) mod sub;
mod value;
mod var;

pub use connection::ConnectionValue;
pub(crate) use ops::{arith, compare, ArithOp, CmpOp};
pub use sub::{Action, Sub};
pub(crate) use value::write_value;
pub use value::{BackendId, PluginId, Value};
pub use var::{PluginPhase, Scope, ValueType, Var};
