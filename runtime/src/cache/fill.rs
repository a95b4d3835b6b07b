//! Filling the cache from one origin response, and what the coalescing leader tells its
//! waiters about that response (see `coalesce`).
//!
//! A storable body is read into a [`SharedBody`] that the requester and the coalesced waiters
//! stream from as it arrives, and the object is stored once the body is complete. A body that
//! grows past `max_object_size` is not stored: it passes through at the pace of its slowest
//! reader and stops when no reader is left. A fill whose last reader left goes on only as far
//! as `finish_abandoned` allows; stopping drops the origin body, which closes its connection.

use std::fmt::Display;
use std::sync::Arc;

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;

use super::body::{ProxyBody, SharedBody};
use super::coalesce::{FetchOutcome, Leader};
use super::key::CacheKey;
use super::object::{CachedObject, EsiParser, ObjectHead};
use super::rules::vary::VaryRule;
use super::SharedCache;

/// What a body too large to store may hold ahead of its slowest reader; the fill waits for
/// that reader beyond it.
const PASS_THROUGH_WINDOW: u64 = 1024 * 1024;

/// One origin fetch's say over `key` in the cache.
pub(crate) struct Fill {
    cache: SharedCache,
    key: CacheKey,
    /// The coalescing role; `None` for a fetch nobody waits on (a key remembered as
    /// hit-for-pass, a request that gave up waiting).
    leader: Option<Leader>,
    /// `--max-object-size`.
    max_object_size: u64,
    /// `--finish-abandoned-fills`: bytes an abandoned fill may still read.
    finish_abandoned: u64,
    /// The key is remembered as hit-for-pass already: an uncacheable response leaves the mark
    /// as it is rather than write it again.
    marked: bool,
    /// Parses the body of an object stored with `beresp.do_esi` (see [`Fill::parse_esi_with`]).
    esi_parser: Option<EsiParser>,
}

impl Fill {
    pub fn new(
        cache: SharedCache,
        key: CacheKey,
        leader: Option<Leader>,
        max_object_size: u64,
        finish_abandoned: u64,
    ) -> Fill {
        Fill {
            cache,
            key,
            leader,
            max_object_size,
            finish_abandoned,
            marked: false,
            esi_parser: None,
        }
    }

    /// A complete body whose head asks for ESI (`ObjectHead::esi`) is parsed with `parser`
    /// before it is stored, once, so that its hits only assemble.
    pub fn parse_esi_with(&mut self, parser: EsiParser) {
        self.esi_parser = Some(parser);
    }

    /// For a fetch of a key found remembered as hit-for-pass: see [`Fill::uncacheable`].
    pub fn keep_hit_for_pass_mark(&mut self) {
        self.marked = true;
    }

    pub fn key(&self) -> &CacheKey {
        &self.key
    }

    /// The response is not storable: the waiters go to the origin themselves, and the key is
    /// remembered as hit-for-pass (unless it is already, see [`Fill::keep_hit_for_pass_mark`]).
    pub fn uncacheable(&self) {
        match &self.leader {
            Some(leader) => leader.publish(FetchOutcome::Uncacheable),
            None if self.marked => {}
            None => self.cache.coalescer.mark_hit_for_pass(self.key.clone()),
        }
    }

    /// The policy replaced the response: the waiters go to the origin themselves.
    pub fn replaced(&self) {
        if let Some(leader) = &self.leader {
            leader.publish(FetchOutcome::Uncacheable);
        }
    }

    /// Stores a complete `object` (a stale one a 304 confirmed, with the merged fields) at
    /// once; the waiters read its stored body.
    pub fn store_complete(&self, object: Arc<CachedObject>, rule: VaryRule) {
        if let Some(leader) = &self.leader {
            leader.publish(FetchOutcome::Streaming {
                head: object.head.clone(),
                rule: Arc::new(rule.clone()),
                body: Arc::new(SharedBody::complete(&object.body)),
            });
        }
        self.cache.store.insert(self.key.clone(), rule, object);
    }

    /// Removes what is stored for the key.
    pub fn purge(&self) {
        self.cache.store.purge(&self.key);
    }

    /// Ends the fetch: later requests look in the store or lead anew.
    pub fn finish(self) {
        if let Some(leader) = self.leader {
            leader.finish();
        }
    }

    /// Starts streaming a storable response: the waiters join it, and the requester gets the
    /// returned reader. `length` is the body's announced length; it sizes the buffer when the
    /// object may be stored.
    pub fn start(
        &self,
        head: &Arc<ObjectHead>,
        rule: &VaryRule,
        length: Option<u64>,
    ) -> (Arc<SharedBody>, ProxyBody) {
        // Registered before the fill starts, so the fill knows someone reads it.
        let expected = length.filter(|&length| length <= self.max_object_size);
        let (sink, reader) = SharedBody::with_reader(expected);
        if let Some(leader) = &self.leader {
            leader.publish(FetchOutcome::Streaming {
                head: head.clone(),
                rule: Arc::new(rule.clone()),
                body: sink.clone(),
            });
        }
        (sink, reader)
    }

    /// Reads `body` (from `origin`, named in the logs) into `sink` and stores the object once
    /// complete (see the module doc for bodies too large or abandoned).
    pub async fn run<B>(
        self,
        mut body: B,
        head: Arc<ObjectHead>,
        rule: VaryRule,
        sink: Arc<SharedBody>,
        origin: &str,
    ) where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Display,
    {
        let limit = self.max_object_size;
        let mut passing = false;
        // Set when the last reader left: the length past which the fill stops.
        let mut stop_past: Option<u64> = None;
        let mut received: u64 = 0;
        loop {
            let frame = tokio::select! {
                frame = body.frame() => frame,
                () = sink.abandoned(), if stop_past.is_none() && !passing => {
                    let budget = self.finish_abandoned;
                    // Hyper's hint is what is still to come of a `Content-Length` body.
                    stop_past = match body.size_hint().exact() {
                        Some(remaining) if remaining <= budget => Some(u64::MAX),
                        None if budget > 0 => Some(received.saturating_add(budget)),
                        _ => {
                            stop(&sink, origin, "its last client left (--finish-abandoned-fills)");
                            return;
                        }
                    };
                    continue;
                }
            };
            let Some(frame) = frame else { break };
            let data = match frame.map(Frame::into_data) {
                Ok(Ok(data)) => data,
                // Trailers are not stored.
                Ok(Err(_)) => continue,
                Err(error) => {
                    tracing::warn!(backend = origin, "{error}");
                    sink.fail(error.to_string());
                    return;
                }
            };
            received = sink.push(data);
            if !passing && received > limit {
                tracing::debug!(
                    limit,
                    "body larger than max-object-size: not stored, passed through"
                );
                passing = true;
                sink.pass_through();
                self.uncacheable();
            }
            if passing && !sink.wait_for_readers(PASS_THROUGH_WINDOW).await {
                stop(&sink, origin, "every client of a body too large to store left");
                return;
            }
            if stop_past.is_some_and(|past| received > past) {
                stop(
                    &sink,
                    origin,
                    "its last client left and more than --finish-abandoned-fills arrived since",
                );
                return;
            }
        }
        // Stored before the readers see the end, so a client that read the whole body finds
        // the object in the cache (an immediate PURGE removes it).
        if !passing {
            let body = sink.stored();
            let esi = self
                .esi_parser
                .filter(|_| head.esi)
                .and_then(|parse| parse(&head, &body))
                .map(Arc::new);
            let object = Arc::new(CachedObject::new(head, body).with_esi(esi));
            self.cache.store.insert(self.key.clone(), rule, object);
            self.cache.coalescer.clear_hit_for_pass(&self.key);
        }
        sink.finish();
        self.finish();
    }
}

/// Gives up a fill: its readers (if any are left) get an error after what they read, and the
/// leader goes without finishing, so the next request for the key fetches anew.
fn stop(sink: &SharedBody, origin: &str, why: &str) {
    tracing::debug!(backend = origin, "fill stopped: {why}");
    sink.fail(format!("fill stopped: {why}"));
}
