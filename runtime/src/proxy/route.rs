//! Where and for whom a client request's origin fetches go: the shared state, the version the
//! request started on, the backend picked for it, and the client.

use std::net::SocketAddr;
use std::sync::Arc;

use policy_lang::BackendId;

use super::Shared;
use crate::backend::Backend;
use crate::version::Version;

/// A client request's way to the origin: what every fetch, pass and pipe it makes needs.
#[derive(Clone, Copy)]
pub(super) struct Route<'a> {
    pub shared: &'a Arc<Shared>,
    pub version: &'a Arc<Version>,
    /// The backend picked for the request.
    pub backend: &'a Backend,
    /// The policy's choice `backend` was picked from (a backend or a director), which a retry
    /// asks again.
    pub hint: Option<BackendId>,
    pub client: SocketAddr,
}

impl<'a> Route<'a> {
    /// The route to the backend `hint` leads to now (see [`Version::pick`]).
    pub fn pick(
        shared: &'a Arc<Shared>,
        version: &'a Arc<Version>,
        client: SocketAddr,
        hint: Option<BackendId>,
    ) -> Route<'a> {
        Route {
            shared,
            version,
            backend: version.pick(hint),
            hint,
            client,
        }
    }
}
