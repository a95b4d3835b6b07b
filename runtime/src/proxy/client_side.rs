//! What a request carries of the client connection it came on, and its transaction id: one
//! value ([`ClientSide`]) in its extensions, put there by `driver::handle` and copied to the
//! backend requests made for it. One value rather than one per field: every value in
//! `http::Extensions` is an allocation and a hash-map insert per request, and another per
//! backend request.

use std::sync::Arc;

use crate::backend::ConnectionAddresses;

use super::{ClientTls, ListenerName, Proxied};

/// A client connection as the server accepted it, shared by all of its requests.
pub(crate) struct ClientConnection {
    /// The TCP peer (`client.ip`) and the address it connected to (`server.ip`).
    pub addresses: ConnectionAddresses,
    /// `local.socket` / `local.endpoint`.
    pub listener: Arc<ListenerName>,
    /// What TLS negotiated, on a `,tls` listener.
    pub tls: Option<ClientTls>,
    /// What the load balancer's PROXY header said, on a `,PROXY` listener.
    pub proxied: Option<Proxied>,
}

/// The client's side of a request, in its extensions and in those of its backend requests.
#[derive(Clone)]
pub(super) struct ClientSide {
    pub connection: Arc<ClientConnection>,
    /// `req.xid` / `bereq.xid`: the id the access log and the error pages show.
    pub xid: i64,
}

impl ClientSide {
    pub(super) fn of(extensions: &http::Extensions) -> Option<&ClientSide> {
        extensions.get::<ClientSide>()
    }

    /// The request's xid, or `None` for a request that did not come from a client.
    pub(super) fn xid_of(extensions: &http::Extensions) -> Option<i64> {
        Self::of(extensions).map(|side| side.xid)
    }
}
