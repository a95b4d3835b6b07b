//! Host names in ACLs (`"drupal"`, `"app.internal"`), resolved when the policy loads, as
//! Varnish does: each address a name resolves to becomes an entry with the name's mask and
//! negation. A name that does not resolve is an error naming it; a parenthesised one
//! (`("maybe.there");`) is skipped with a warning. The crate does no lookup itself: it asks the
//! caller's [`SourceLoader::resolve_host`](crate::SourceLoader::resolve_host).

use crate::diagnostics::{Code, Diagnostic, Sink};
use crate::tree::{Acl, AclRule};
use crate::SourceLoader;

/// Turns every host name of `acls` into entries, reporting the names that do not resolve.
pub(crate) fn resolve(acls: &mut [Acl], loader: Option<&dyn SourceLoader>, sink: &mut Sink) {
    for acl in acls {
        for entry in std::mem::take(&mut acl.names) {
            let found = match loader {
                Some(loader) => loader.resolve_host(&entry.name),
                None => Err("host names are resolved only when a policy is loaded from a file".to_string()),
            };
            match found {
                Ok(addresses) => {
                    for addr in addresses {
                        let max = if addr.is_ipv4() { 32 } else { 128 };
                        acl.rules.push(AclRule {
                            negated: entry.negated,
                            addr,
                            prefix: entry.mask.map_or(max, |mask| mask.min(max)) as u8,
                        });
                    }
                }
                Err(cause) if entry.optional => sink.push(
                    Diagnostic::new(
                        Code::NoEffect,
                        entry.span,
                        format!("ACL entry `{}` is ignored: it does not resolve ({cause})", entry.name),
                    )
                    .label("host name looked up when the policy loads"),
                ),
                Err(cause) => sink.push(
                    Diagnostic::new(
                        Code::BadDeclaration,
                        entry.span,
                        format!("ACL entry `{}` does not resolve: {cause}", entry.name),
                    )
                    .label("host name looked up when the policy loads")
                    .hint(format!(
                        "check the name, write its address, or wrap the entry in parentheses (`(\"{}\");`) to skip it when it does not resolve, as Varnish",
                        entry.name
                    )),
                ),
            }
        }
    }
}
