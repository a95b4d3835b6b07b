//! The request path: from a client request to a response, through policy, cache and backend.
//!
//! `driver` is the only code that orders the phases (recv, hash, lookup, fetch,
//! backend_response, store, deliver); `fetch` runs one origin fetch, storing what may be stored;
//! `headers` holds the intermediary's header rules; `synth` is the only place that picks error
//! statuses; `access_log` writes one event per request.

mod access_log;
mod driver;
mod fetch;
mod headers;
mod respond;
mod synth;

use std::time::Duration;

use http::HeaderName;
use ipnet::IpNet;

use crate::backend::Backend;
use crate::cache::coalesce::Coalescer;
use crate::cache::rules::freshness::FreshnessOptions;
use crate::cache::rules::storable::StoreOptions;
use crate::cache::store::Store;
use crate::config::Config;

pub(crate) use driver::handle;

/// What every request shares: settings, the cache, the origin.
pub(crate) struct Shared {
    pub backend: Backend,
    pub store: Store,
    pub coalescer: Coalescer,
    pub freshness: FreshnessOptions,
    pub storing: StoreOptions,
    pub max_object_size: u64,
    pub coalesce_wait: Duration,
    pub purge_allow: Vec<IpNet>,
    pub cache_status_header: HeaderName,
    pub grace: Duration,
    pub keep: Duration,
    pub ignore_request_cache_control: bool,
    pub targeted_cache_control: Option<HeaderName>,
}

impl Shared {
    pub fn new(config: &Config, backend: Backend) -> Shared {
        Shared {
            backend,
            store: Store::new(config.cache_size),
            coalescer: Coalescer::new(config.hit_for_pass_ttl),
            freshness: FreshnessOptions {
                default_ttl: config.default_ttl,
                ..FreshnessOptions::default()
            },
            storing: StoreOptions {
                store_set_cookie: config.store_set_cookie,
                default_ttl: config.default_ttl,
            },
            max_object_size: config.max_object_size,
            coalesce_wait: config.coalesce_wait,
            purge_allow: config.purge_allow.clone(),
            cache_status_header: config.cache_status_header.clone(),
            grace: config.grace,
            keep: config.keep,
            ignore_request_cache_control: config.ignore_request_cache_control,
            targeted_cache_control: config.targeted_cache_control.clone(),
        }
    }

    /// The targeted cache-control field name, if enabled.
    pub fn targeted(&self) -> Option<&HeaderName> {
        self.targeted_cache_control.as_ref()
    }
}
