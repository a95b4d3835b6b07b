//! The call graph of subs: recursion, call depth, which methods reach each custom sub.
//!
//! Recursion is reported and the closing call dropped; each method reaching a custom sub is
//! remembered with the call site that brings it in.

use std::collections::HashMap;

use super::SubInfo;
use crate::ast::{Expr, ExprKind, Stmt, StmtKind};
use crate::diagnostics::{Code, Diagnostic, Sink, Span};
use crate::vocab::Sub;

/// Which methods reach each sub (by index in `subs`).
pub(super) struct Reach {
    /// The methods (sub bits) whose calls reach the sub; a method's own bit for a method.
    pub masks: Vec<u16>,
    /// For each method reaching a custom sub, the call site that brings it in.
    pub via: Vec<HashMap<Sub, Span>>,
}

/// Builds the call graph of `subs` (`sub_index` maps names to them), reports recursion and
/// calls nested too deep, and computes what reaches each sub.
pub(super) fn reach(subs: &[SubInfo<'_>], sub_index: &HashMap<String, usize>, sink: &mut Sink) -> Reach {
    let n = subs.len();
    let mut edges: Vec<Vec<(usize, Span)>> = vec![Vec::new(); n];
    for (i, s) in subs.iter().enumerate() {
        for def in &s.defs {
            collect_calls(&def.body, &mut |name, span| {
                if let Some(&j) = sub_index.get(name) {
                    edges[i].push((j, span));
                }
            });
        }
    }
    // Recursion (a back edge: reported and dropped) and call depth (the evaluator recurses once
    // per `call`), in one iterative DFS, so that a long chain of subs cannot exhaust the stack
    // here either.
    let mut color = vec![0u8; n]; // 0: not seen, 1: on the DFS path, 2: done
    let mut depth = vec![0usize; n]; // the longest chain of calls from a sub
    let mut bad_edges: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if color[root] != 0 {
            continue;
        }
        color[root] = 1;
        let mut path = vec![(root, 0usize)];
        while let Some(top) = path.last_mut() {
            let (u, k) = *top;
            let Some(&(v, span)) = edges[u].get(k) else {
                // Back-edge targets are still on the path (colour 1): not counted.
                depth[u] = edges[u]
                    .iter()
                    .filter(|(v, _)| color[*v] == 2)
                    .map(|(v, _)| depth[*v] + 1)
                    .max()
                    .unwrap_or(0);
                color[u] = 2;
                path.pop();
                continue;
            };
            top.1 += 1;
            match color[v] {
                0 => {
                    color[v] = 1;
                    path.push((v, 0));
                }
                1 => {
                    bad_edges.push((u, k));
                    let mut d = Diagnostic::new(
                        Code::Recursion,
                        span,
                        format!("recursive call to `{}`", subs[v].name),
                    )
                    .label("this call closes a cycle")
                    .hint("VCL subs cannot call themselves, directly or through other subs");
                    if u != v {
                        d = d.secondary(subs[v].span, format!("`{}` defined here", subs[v].name));
                    }
                    sink.push(d);
                }
                _ => {}
            }
        }
    }
    const MAX_CALL_DEPTH: usize = 200;
    let deepest = depth.iter().enumerate().max_by_key(|(_, d)| **d);
    if let Some((i, &calls)) = deepest.filter(|(_, d)| **d > MAX_CALL_DEPTH) {
        sink.push(
            Diagnostic::new(
                Code::Recursion,
                subs[i].span,
                format!("calls nest {calls} deep from `{}`", subs[i].name),
            )
            .label(format!("at most {MAX_CALL_DEPTH} subs deep"))
            .hint("merge the subs of the chain: each `call` adds a level"),
        );
    }
    for (u, k) in bad_edges.iter().rev() {
        edges[*u].remove(*k);
    }
    // Which methods reach each sub, and through which call site.
    let mut masks = vec![0u16; n];
    let mut via: Vec<HashMap<Sub, Span>> = vec![HashMap::new(); n];
    for (i, s) in subs.iter().enumerate() {
        let Some(m) = s.method else { continue };
        masks[i] |= m.bit();
        let mut stack = vec![i];
        let mut seen = vec![false; n];
        seen[i] = true;
        while let Some(u) = stack.pop() {
            for &(v, span) in &edges[u] {
                if !seen[v] {
                    seen[v] = true;
                    masks[v] |= m.bit();
                    via[v].entry(m).or_insert(span);
                    stack.push(v);
                }
            }
        }
    }
    Reach { masks, via }
}

fn collect_calls(stmts: &[Stmt], f: &mut dyn FnMut(&str, Span)) {
    for s in stmts {
        match &s.kind {
            StmtKind::Call(id) => f(&id.name, id.span),
            StmtKind::Set { value: e, .. } | StmtKind::Expr(e) => timed_calls(e, f),
            StmtKind::If { branches, otherwise } => {
                for (c, b) in branches {
                    timed_calls(c, f);
                    collect_calls(b, f);
                }
                if let Some(o) = otherwise {
                    collect_calls(o, f);
                }
            }
            StmtKind::Block(b) => collect_calls(b, f),
            _ => {}
        }
    }
}

/// The subs `std.timed_call(SUB)` calls in `e`: calls like any other.
fn timed_calls(e: &Expr, f: &mut dyn FnMut(&str, Span)) {
    match &e.kind {
        ExprKind::Call { func, args } => {
            if let (true, [arg]) = (func.name == "std.timed_call", args.as_slice()) {
                if let ExprKind::Name(sub) = &arg.value.kind {
                    f(sub, arg.value.span);
                }
            }
            args.iter().for_each(|a| timed_calls(&a.value, f));
        }
        ExprKind::Not(inner) | ExprKind::Neg(inner) => timed_calls(inner, f),
        ExprKind::Binary { lhs, rhs, .. } => {
            timed_calls(lhs, f);
            timed_calls(rhs, f);
        }
        _ => {}
    }
}
