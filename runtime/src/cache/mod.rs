//! The shared HTTP cache: RFC 9111 decisions, storage, coalescing of misses.
//!
//! `rules` holds the RFC 9111 decisions as pure functions; `store` keeps objects in moka,
//! bounded in bytes; `coalesce` makes concurrent misses for one key share one origin fetch and
//! remembers uncacheable keys (hit-for-pass); `state` names the cache outcome of a request.
//! This module never calls the proxy, the policy or a backend: the proxy drives it.

pub(crate) mod body;
pub(crate) mod coalesce;
pub(crate) mod key;
pub(crate) mod object;
pub(crate) mod rules;
pub(crate) mod state;
pub(crate) mod store;
