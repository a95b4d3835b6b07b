//! Operators on values: arithmetic ([`ArithOp`]) and comparison ([`CmpOp`]).
//!
//! Their meaning is the evaluator's and constant folding's both.

use super::{BackendId, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

impl ArithOp {
    /// The operator as VCL writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::Rem => "%",
        }
    }
}

impl CmpOp {
    /// The operator as VCL writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Gt => ">",
            CmpOp::Le => "<=",
            CmpOp::Ge => ">=",
        }
    }

    /// The operator with its operands swapped: `a < b` is `b > a`.
    pub fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Ge => CmpOp::Le,
            same => same,
        }
    }

    /// Whether `ord` (left compared with right) satisfies the operator.
    #[inline]
    pub fn holds(self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering;
        match self {
            CmpOp::Eq => ord == Ordering::Equal,
            CmpOp::Ne => ord != Ordering::Equal,
            CmpOp::Lt => ord == Ordering::Less,
            CmpOp::Gt => ord == Ordering::Greater,
            CmpOp::Le => ord != Ordering::Greater,
            CmpOp::Ge => ord != Ordering::Less,
        }
    }
}

/// Arithmetic on values of checked types.
pub(crate) fn arith(op: ArithOp, a: &Value<'_>, b: &Value<'_>) -> Option<Value<'static>> {
    use Value::*;
    Some(match (op, a, b) {
        (ArithOp::Add, Int(x), Int(y)) => Int(x.wrapping_add(*y)),
        (ArithOp::Sub, Int(x), Int(y)) => Int(x.wrapping_sub(*y)),
        (ArithOp::Mul, Int(x), Int(y)) => Int(x.wrapping_mul(*y)),
        (ArithOp::Div, Int(x), Int(y)) => Int(if *y == 0 { 0 } else { x.wrapping_div(*y) }),
        (ArithOp::Rem, Int(x), Int(y)) => Int(if *y == 0 { 0 } else { x.wrapping_rem(*y) }),
        (op, Int(_) | Real(_), Int(_) | Real(_)) => Real(num(op, a.as_real()?, b.as_real()?)),
        (op @ (ArithOp::Add | ArithOp::Sub), Duration(x), Duration(y)) => Duration(num(op, *x, *y)),
        (ArithOp::Add, Bytes(x), Bytes(y)) => Bytes(x.saturating_add(*y)),
        (ArithOp::Sub, Bytes(x), Bytes(y)) => Bytes(x.saturating_sub(*y)),
        (op @ (ArithOp::Add | ArithOp::Sub), Time(x), Duration(y)) => Time(num(op, *x, *y)),
        (ArithOp::Sub, Time(x), Time(y)) => Duration(x - y),
        (op @ (ArithOp::Mul | ArithOp::Div), Duration(x), Int(_) | Real(_)) => {
            Duration(num(op, *x, b.as_real()?))
        }
        (ArithOp::Mul, Int(_) | Real(_), Duration(y)) => Duration(a.as_real()? * y),
        (op @ (ArithOp::Mul | ArithOp::Div), Bytes(x), Int(_) | Real(_)) => {
            Bytes(num(op, *x as f64, b.as_real()?).max(0.0) as u64)
        }
        _ => return None,
    })
}

fn num(op: ArithOp, x: f64, y: f64) -> f64 {
    let r = match op {
        ArithOp::Add => x + y,
        ArithOp::Sub => x - y,
        ArithOp::Mul => x * y,
        ArithOp::Div => x / y,
        ArithOp::Rem => x % y,
    };
    if r.is_finite() {
        r
    } else {
        0.0
    }
}

/// Comparison of values of checked types; unset strings compare as `""`.
pub(crate) fn compare(op: CmpOp, a: &Value<'_>, b: &Value<'_>) -> bool {
    use std::cmp::Ordering;
    use Value::*;
    let ord: Option<Ordering> = match (a, b) {
        (Str(_) | Unset, Str(_) | Unset) => {
            let x = a.as_str().unwrap_or("");
            let y = b.as_str().unwrap_or("");
            Some(x.cmp(y))
        }
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (Int(_) | Real(_), Int(_) | Real(_)) => {
            a.as_real().zip(b.as_real()).and_then(|(x, y)| x.partial_cmp(&y))
        }
        (Duration(x), Duration(y)) | (Time(x), Time(y)) => x.partial_cmp(y),
        (Bytes(x), Bytes(y)) => Some(x.cmp(y)),
        (Bool(x), Bool(y)) => Some(x.cmp(y)),
        (Ip(x), Ip(y)) => Some(x.cmp(y)),
        // A director compares as itself, whatever key it was given.
        (Backend(x), Backend(y)) => Some(x.map(BackendId::index).cmp(&y.map(BackendId::index))),
        _ => None,
    };
    match ord {
        Some(ord) => op.holds(ord),
        None => matches!(op, CmpOp::Ne),
    }
}
