//! `GET /metrics`: the counters in the Prometheus text format, through `prometheus-client`.
//!
//! The request path keeps plain atomics ([`crate::telemetry`]); a [`Collector`] reads them at
//! scrape time, so no value is counted twice and nothing on the request path knows about
//! Prometheus. The one metric that needs its own storage is the request-duration histogram,
//! [`RequestLatency`](crate::telemetry::RequestLatency), which the proxy records into.
//!
//! Names (all prefixed `edgecache_`): `requests_total{result}`, `coalesced_waits_total`,
//! `backend_fetches_total{backend}`, `backend_failures_total{backend}`,
//! `backend_in_flight{backend}`, `backend_refused_total{backend}`, `backend_healthy{backend}`
//! (1 or 0; always 1 without a probe), `backend_probes_total{backend,result}` (`good`/`bad`, probed
//! backends only), `cache_objects`, `cache_bytes`, `cache_evictions_total`,
//! `surrogate_keys`, `surrogate_key_objects`, `purged_by_key_total`, `soft_purged_served_total`,
//! `partial_hits_total`, `slice_fetches_total`, `sliced_representations`,
//! `plugin_failures_total{plugin,cause}`, `plugin_instances_created_total{plugin}`,
//! `plugin_counter_total{plugin,metric}`, `plugin_gauge{plugin,metric}`,
//! `plugin_histogram_count_total` / `plugin_histogram_sum{plugin,metric}` (what plugins define),
//! `bans`, `bans_tested_total`, `bans_lurked_total`, `bans_lurker_tested_total`,
//! `bans_lurker_removed_total`, `reloads_total{outcome}`, `policy_generation`,
//! `worker_connections_total{worker}`, `uptime_seconds`,
//! `request_duration_seconds` (histogram), and with `--peers`
//! `peer_invalidations_total{peer,outcome}` (`applied`, `refused`, `unreachable`: how the purges
//! and bans forwarded to each peer ended, the admin API's and the policy's).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use super::State;
use crate::peers::Peers;

/// The registry behind `/metrics`.
pub(super) fn registry(state: Arc<State>, peers: Option<Arc<Peers>>) -> Registry {
    let mut registry = Registry::default();
    registry.register_with_unit(
        "edgecache_request_duration",
        "Time from the request head received to the response head sent",
        Unit::Seconds,
        state.latency.histogram().clone(),
    );
    registry.register_collector(Box::new(Counters(state)));
    if let Some(peers) = peers {
        registry.register_collector(Box::new(PeerCounters(peers)));
    }
    registry
}

/// Encodes the registry: the Prometheus text format 0.0.4, or OpenMetrics when the scraper asks
/// for it in `Accept`. Returns the body and its content type.
pub(super) fn encode(registry: &Registry, accept: &str) -> (String, &'static str) {
    let mut text = String::new();
    if accept.contains("application/openmetrics-text") {
        prometheus_client::encoding::text::encode(&mut text, registry).expect("writing to a String");
        (text, "application/openmetrics-text; version=1.0.0; charset=utf-8")
    } else {
        prometheus_client::encoding::prometheus_text::encode(&mut text, registry)
            .expect("writing to a String");
        (text, prometheus_client::encoding::prometheus_text::CONTENT_TYPE)
    }
}

/// Reads the proxy's atomics at scrape time.
struct Counters(Arc<State>);

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counters")
    }
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: i64) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// One metric family with a series per label value.
fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    label: &'static str,
    series: impl IntoIterator<Item = (String, M)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, kind)?;
    for (value, metric) in series {
        let labels = [(label, value)];
        metric.encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

fn as_gauge(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Collector for Counters {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let state = &self.0;
        let stats = &state.stats;
        let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        family(
            &mut encoder,
            "edgecache_requests",
            "Finished client requests by cache result",
            MetricType::Counter,
            "result",
            [
                ("hit", &stats.hits),
                ("miss", &stats.misses),
                ("pass", &stats.passes),
                ("stale", &stats.stale),
                ("revalidated", &stats.revalidated),
                ("synth", &stats.synth),
                ("pipe", &stats.pipes),
            ]
            .map(|(result, value)| (result.to_string(), ConstCounter::new(load(value)))),
        )?;
        counter(
            &mut encoder,
            "edgecache_coalesced_waits",
            "Requests that waited on another request's origin fetch of the same object",
            load(&stats.coalesced_waits),
        )?;
        counter(
            &mut encoder,
            "edgecache_pipe_bytes",
            "Bytes copied through pipe tunnels (return (pipe), WebSocket), both ways",
            load(&stats.pipe_bytes),
        )?;
        counter(
            &mut encoder,
            "edgecache_pipes_refused",
            "Pipes refused with 503 because --max-pipes tunnels were open",
            load(&stats.pipes_refused),
        )?;
        counter(
            &mut encoder,
            "edgecache_esi_includes",
            "ESI includes requested while assembling pages",
            load(&stats.esi_includes),
        )?;
        counter(
            &mut encoder,
            "edgecache_esi_include_failures",
            "ESI includes that failed: left out (onerror=\"continue\") or cutting their page short",
            load(&stats.esi_failures),
        )?;
        let keys = state.cache.store.keys();
        gauge(
            &mut encoder,
            "edgecache_surrogate_keys",
            "Surrogate keys indexed (xkey, Surrogate-Key, Cache-Tag), each with at least one object",
            as_gauge(keys.keys() as u64),
        )?;
        gauge(
            &mut encoder,
            "edgecache_surrogate_key_objects",
            "Stored objects indexed under at least one surrogate key",
            as_gauge(keys.objects()),
        )?;
        counter(
            &mut encoder,
            "edgecache_purged_by_key",
            "Objects removed or made stale by purges by surrogate key (xkey.*, POST /purge?key=)",
            keys.purged(),
        )?;
        counter(
            &mut encoder,
            "edgecache_soft_purged_served",
            "Soft-purged objects served stale while their refresh ran",
            load(&stats.soft_purged_served),
        )?;
        counter(
            &mut encoder,
            "edgecache_partial_hits",
            "Requests answered from stored slices alone (RFC 9111 partial content)",
            load(&stats.partial_hits),
        )?;
        counter(
            &mut encoder,
            "edgecache_slice_fetches",
            "Slices of representations stored by parts asked from the origin",
            load(&stats.slice_fetches),
        )?;
        counter(
            &mut encoder,
            "edgecache_pcre_limit_hits",
            "Policy regex matches that hit PCRE2's match or depth limit (counted as no match)",
            policy_lang::pcre_limit_hits(),
        )?;
        let version = state.active.load_full();
        let backends = || {
            version
                .backends
                .iter()
                .map(|backend| (backend.name().to_string(), backend.stats()))
        };
        family(
            &mut encoder,
            "edgecache_backend_fetches",
            "Requests sent to each backend of the active version",
            MetricType::Counter,
            "backend",
            backends().map(|(name, stats)| (name, ConstCounter::new(load(&stats.fetches)))),
        )?;
        family(
            &mut encoder,
            "edgecache_backend_failures",
            "Failed requests to each backend (connect, timeout, protocol)",
            MetricType::Counter,
            "backend",
            backends().map(|(name, stats)| (name, ConstCounter::new(load(&stats.failures)))),
        )?;
        family(
            &mut encoder,
            "edgecache_backend_in_flight",
            "Requests sent to each backend whose response body has not ended",
            MetricType::Gauge,
            "backend",
            backends().map(|(name, stats)| (name, ConstGauge::new(as_gauge(load(&stats.in_flight))))),
        )?;
        family(
            &mut encoder,
            "edgecache_backend_refused",
            "Requests failed without contacting the backend because max_connections were in flight",
            MetricType::Counter,
            "backend",
            backends().map(|(name, stats)| (name, ConstCounter::new(load(&stats.refused)))),
        )?;
        family(
            &mut encoder,
            "edgecache_backend_healthy",
            "1 when the backend's probe says it is healthy (always 1 without a probe), else 0",
            MetricType::Gauge,
            "backend",
            version.backends.iter().map(|backend| {
                (
                    backend.name().to_string(),
                    ConstGauge::new(i64::from(backend.healthy())),
                )
            }),
        )?;
        {
            let mut probes = encoder.encode_descriptor(
                "edgecache_backend_probes",
                "Health probes of each probed backend by result",
                None,
                MetricType::Counter,
            )?;
            for backend in version
                .backends
                .iter()
                .filter(|backend| backend.options().probe.is_some())
            {
                let stats = backend.stats();
                for (result, value) in [("good", &stats.probes_good), ("bad", &stats.probes_bad)] {
                    let labels = [("backend", backend.name()), ("result", result)];
                    ConstCounter::new(load(value)).encode(probes.encode_family(&labels)?)?;
                }
            }
        }
        {
            let mut failures = encoder.encode_descriptor(
                "edgecache_plugin_failures",
                "Plugin callbacks that failed, by plugin and cause (the instance was replaced)",
                None,
                MetricType::Counter,
            )?;
            for plugin in &version.plugins {
                let stats = plugin.stats();
                for (cause, value) in [
                    ("trap", stats.traps),
                    ("deadline", stats.deadlines),
                    ("out_of_memory", stats.out_of_memory),
                    ("abi", stats.abi_errors),
                    ("pause_timeout", stats.pause_timeouts),
                ] {
                    let labels = [("plugin", plugin.name()), ("cause", cause)];
                    ConstCounter::new(value).encode(failures.encode_family(&labels)?)?;
                }
            }
        }
        family(
            &mut encoder,
            "edgecache_plugin_instances_created",
            "Plugin instances started (at load, to replace a failed one, or per request)",
            MetricType::Counter,
            "plugin",
            version.plugins.iter().map(|plugin| {
                (
                    plugin.name().to_string(),
                    ConstCounter::new(plugin.stats().instances_created),
                )
            }),
        )?;
        // The metrics plugins define (`proxy_define_metric`), labelled with the plugin and the
        // metric's own name: counters, gauges, and histograms as a count and a sum.
        let defined: Vec<_> = version
            .plugins
            .iter()
            .map(|plugin| (plugin.name(), plugin.metrics()))
            .collect();
        let families = [
            (
                "edgecache_plugin_counter",
                "Counters defined by plugins",
                MetricType::Counter,
                0,
            ),
            (
                "edgecache_plugin_gauge",
                "Gauges defined by plugins",
                MetricType::Gauge,
                1,
            ),
            (
                "edgecache_plugin_histogram_count",
                "Values recorded in plugins' histograms",
                MetricType::Counter,
                2,
            ),
            (
                "edgecache_plugin_histogram_sum",
                "Sum of the values recorded in plugins' histograms",
                MetricType::Gauge,
                2,
            ),
        ];
        for (name, help, kind, abi_kind) in families {
            let series: Vec<_> = defined
                .iter()
                .flat_map(|(plugin, metrics)| metrics.iter().map(move |metric| (*plugin, metric)))
                .filter(|(_, metric)| metric.kind == abi_kind)
                .collect();
            if series.is_empty() {
                continue;
            }
            let mut family = encoder.encode_descriptor(name, help, None, kind)?;
            for (plugin, metric) in series {
                let labels = [("plugin", plugin), ("metric", metric.name.as_str())];
                let encoder = family.encode_family(&labels)?;
                match (abi_kind, kind) {
                    (0, _) => ConstCounter::new(u64::try_from(metric.value).unwrap_or(0)).encode(encoder)?,
                    (1, _) => ConstGauge::new(metric.value).encode(encoder)?,
                    (_, MetricType::Counter) => ConstCounter::new(metric.count).encode(encoder)?,
                    _ => ConstGauge::new(metric.sum).encode(encoder)?,
                }
            }
        }
        gauge(
            &mut encoder,
            "edgecache_cache_objects",
            "Objects stored (primary keys: the Vary variants of one URL count once)",
            as_gauge(state.cache.store.entry_count()),
        )?;
        gauge(
            &mut encoder,
            "edgecache_cache_bytes",
            "Bytes stored (headers and bodies), bounded by the cache size",
            as_gauge(state.cache.store.weighted_size()),
        )?;
        gauge(
            &mut encoder,
            "edgecache_sliced_representations",
            "Representations stored by slices (or known too large to store whole)",
            as_gauge(state.cache.partials.count()),
        )?;
        counter(
            &mut encoder,
            "edgecache_cache_evictions",
            "Objects dropped to stay under the cache size",
            load(&stats.evictions),
        )?;
        gauge(
            &mut encoder,
            "edgecache_bans",
            "Bans in the ban list",
            as_gauge(super::bans::trim(&state.cache) as u64),
        )?;
        let bans = state.cache.ban_counters();
        counter(
            &mut encoder,
            "edgecache_bans_tested",
            "Ban expressions tested against objects at lookup",
            bans.tested,
        )?;
        counter(
            &mut encoder,
            "edgecache_bans_lurked",
            "Bans on obj.* the lurker tested against every older object and dropped",
            bans.lurked,
        )?;
        counter(
            &mut encoder,
            "edgecache_bans_lurker_tested",
            "Ban expressions the lurker tested against objects",
            bans.lurker_tested,
        )?;
        counter(
            &mut encoder,
            "edgecache_bans_lurker_removed",
            "Objects the ban lurker removed",
            bans.lurker_removed,
        )?;
        let reloads = state.reloader.status();
        family(
            &mut encoder,
            "edgecache_reloads",
            "Reloads by outcome (a failed one keeps the previous version serving)",
            MetricType::Counter,
            "outcome",
            [
                ("ok".to_string(), ConstCounter::new(reloads.ok)),
                ("failed".to_string(), ConstCounter::new(reloads.failed)),
            ],
        )?;
        gauge(
            &mut encoder,
            "edgecache_policy_generation",
            "Generation of the active version (1 at start, +1 per successful reload)",
            as_gauge(version.generation),
        )?;
        gauge(
            &mut encoder,
            "edgecache_uptime_seconds",
            "Seconds since edgecache started",
            as_gauge(state.started.elapsed().as_secs()),
        )?;
        family(
            &mut encoder,
            "edgecache_worker_connections",
            "Client connections accepted by each worker (one per --threads with --worker-model reuseport)",
            MetricType::Counter,
            "worker",
            (stats.worker_connections.counts().into_iter().enumerate())
                .map(|(worker, accepted)| (worker.to_string(), ConstCounter::new(accepted))),
        )?;
        Ok(())
    }
}

/// Reads how the forwards to each peer ended, at scrape time.
struct PeerCounters(Arc<Peers>);

impl std::fmt::Debug for PeerCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerCounters")
    }
}

impl Collector for PeerCounters {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "edgecache_peer_invalidations",
            "Purges and bans forwarded to each peer, by how they ended",
            None,
            MetricType::Counter,
        )?;
        for (peer, outcomes) in self.0.outcomes() {
            for (outcome, value) in [
                ("applied", outcomes.applied),
                ("refused", outcomes.refused),
                ("unreachable", outcomes.unreachable),
            ] {
                let labels = [("peer", peer.as_str()), ("outcome", outcome)];
                ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}
