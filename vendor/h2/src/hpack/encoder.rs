use super::table::{static_field_index, static_index};
use super::Header;

use bytes::{BufMut, BytesMut};
use http::HeaderMap;

const DEFAULT_MAX_ALLOWED_SIZE: usize = 4 * 1024;

/// HPACK encoder.
///
/// edgecache: every field is written as a literal without indexing, its name taken from the
/// static table where it is there, its value as raw octets (no Huffman code), and nothing is
/// ever put into the dynamic table; a field whose name and value are both in the static table
/// (`:status: 200`, `:method: GET`) is written as that index. That is how HAProxy's and nginx's
/// encoders write responses: the peer's decoder does all it must either way, and this side
/// spends no hashing, probing, eviction or Huffman coding per field (1.1k of the 4.4k
/// instructions the encoder took per h2c cache hit; `vendor/h2/EDGECACHE.md`). The cost is
/// bytes: a field repeated on every response of a connection is sent whole each time.
#[derive(Debug)]
pub struct Encoder {
    /// The dynamic table size the peer's decoder was last told of. Nothing is inserted, but a
    /// lowered `SETTINGS_HEADER_TABLE_SIZE` must still be acknowledged with a size update at the
    /// start of the next header block (RFC 7541, section 4.2).
    max_size: usize,
    max_allowed_size: usize,
    size_update: Option<SizeUpdate>,
    /// Reusable buffer for the encoded header block of a single frame.
    ///
    /// A header block only has to live until it is copied into the
    /// connection write buffer, so the buffer that holds it can be reused
    /// across frames instead of being allocated and freed per frame. See
    /// `take_scratch` / `return_scratch`.
    scratch: BytesMut,
}

#[derive(Debug, Copy, Clone, Eq, PartialEq)]
enum SizeUpdate {
    One(usize),
    Two(usize, usize), // min, max
}

impl Encoder {
    pub fn new(max_size: usize) -> Encoder {
        Encoder {
            max_size: max_size.min(DEFAULT_MAX_ALLOWED_SIZE),
            max_allowed_size: DEFAULT_MAX_ALLOWED_SIZE,
            size_update: None,
            scratch: BytesMut::new(),
        }
    }

    /// Takes the reusable buffer for one header-block encode.
    ///
    /// The buffer is returned by `return_scratch` once the encoded block has
    /// been copied into the write buffer. If it is not returned - the
    /// CONTINUATION path keeps it, since the remainder is still needed - the
    /// next call simply starts from a fresh buffer.
    pub(crate) fn take_scratch(&mut self) -> BytesMut {
        std::mem::take(&mut self.scratch)
    }

    /// Returns a fully-written header block buffer for reuse.
    pub(crate) fn return_scratch(&mut self, scratch: BytesMut) {
        self.scratch = scratch;
    }

    /// Queues a max size update.
    ///
    /// The next call to `encode` will include a dynamic size update frame.
    pub fn update_max_size(&mut self, val: usize) {
        let val = val.min(self.max_allowed_size);

        match self.size_update {
            Some(SizeUpdate::One(old)) => {
                if val > old {
                    if old > self.max_size {
                        self.size_update = Some(SizeUpdate::One(val));
                    } else {
                        self.size_update = Some(SizeUpdate::Two(old, val));
                    }
                } else {
                    self.size_update = Some(SizeUpdate::One(val));
                }
            }
            Some(SizeUpdate::Two(min, _)) => {
                if val < min {
                    self.size_update = Some(SizeUpdate::One(val));
                } else {
                    self.size_update = Some(SizeUpdate::Two(min, val));
                }
            }
            None => {
                if val != self.max_size {
                    // Don't bother writing a frame if the value already matches
                    // the table's max size.
                    self.size_update = Some(SizeUpdate::One(val));
                }
            }
        }
    }

    /// Encodes a header block into `dst`: the pseudo-header fields, then `fields`.
    ///
    /// edgecache: the fields are read where they are, not moved one by one into `Header`s and
    /// dropped (1.9k instructions per h2c cache hit, 34.8k -> 32.9k; docs/BENCHMARKS.md).
    pub fn encode(
        &mut self,
        pseudo: impl IntoIterator<Item = Header>,
        fields: &HeaderMap,
        dst: &mut BytesMut,
    ) {
        let span = tracing::trace_span!("hpack::encode");
        let _e = span.enter();

        self.encode_size_updates(dst);

        for header in pseudo {
            match static_index(&header) {
                Some((index, true)) => encode_int(index, 7, 0x80, dst),
                name => {
                    let value = header.value_slice();
                    encode_literal(header.name().as_slice(), name, value, header.is_sensitive(), dst)
                }
            }
        }
        for (name, value) in fields {
            match static_field_index(name, value) {
                Some((index, true)) => encode_int(index, 7, 0x80, dst),
                static_name => encode_literal(
                    name.as_str().as_bytes(),
                    static_name,
                    value.as_bytes(),
                    value.is_sensitive(),
                    dst,
                ),
            }
        }
    }

    fn encode_size_updates(&mut self, dst: &mut BytesMut) {
        match self.size_update.take() {
            Some(SizeUpdate::One(val)) => {
                self.max_size = val;
                encode_size_update(val, dst);
            }
            Some(SizeUpdate::Two(min, max)) => {
                self.max_size = max;
                encode_size_update(min, dst);
                encode_size_update(max, dst);
            }
            None => {}
        }
    }
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new(4096)
    }
}

fn encode_size_update(val: usize, dst: &mut BytesMut) {
    encode_int(val, 5, 0b0010_0000, dst)
}

/// A literal field without indexing (`0000`), or never indexed (`0001`) when its value is
/// sensitive (RFC 7541, sections 6.2.2 and 6.2.3): the name by its static index where the
/// static table has it, else as a string.
fn encode_literal(
    name: &[u8],
    static_name: Option<(usize, bool)>,
    value: &[u8],
    sensitive: bool,
    dst: &mut BytesMut,
) {
    let first_byte = if sensitive { 0b0001_0000 } else { 0 };
    match static_name {
        Some((index, _)) => encode_int(index, 4, first_byte, dst),
        None => {
            dst.put_u8(first_byte);
            encode_str(name, dst);
        }
    }
    encode_str(value, dst);
}

/// A string literal as raw octets (the Huffman flag clear).
fn encode_str(val: &[u8], dst: &mut BytesMut) {
    encode_int(val.len(), 7, 0, dst);
    dst.extend_from_slice(val);
}

/// Encode an integer into the given destination buffer
fn encode_int<B: BufMut>(
    mut value: usize,   // The integer to encode
    prefix_bits: usize, // The number of bits in the prefix
    first_byte: u8,     // The base upon which to start encoding the int
    dst: &mut B,
) {
    if encode_int_one_byte(value, prefix_bits) {
        dst.put_u8(first_byte | value as u8);
        return;
    }

    let low = (1 << prefix_bits) - 1;

    value -= low;

    dst.put_u8(first_byte | low as u8);

    while value >= 128 {
        dst.put_u8(0b1000_0000 | value as u8);

        value >>= 7;
    }

    dst.put_u8(value as u8);
}

/// Returns true if the in the int can be fully encoded in the first byte.
fn encode_int_one_byte(value: usize, prefix_bits: usize) -> bool {
    value < (1 << prefix_bits) - 1
}

/// The encoder's input as h2 once gave it (a field without a name is another value of the
/// previous one), split as a frame holds it: the pseudo-header fields, and the others as a map;
/// and the fields as the peer decodes them, in that order.
#[cfg(test)]
pub(crate) fn split_block(
    hdrs: Vec<Header<Option<http::HeaderName>>>,
) -> (Vec<Header>, HeaderMap, Vec<Header>) {
    let mut pseudo = vec![];
    let mut fields = HeaderMap::new();
    let mut last = None;
    for header in hdrs {
        match header {
            Header::Field { name, value } => {
                let name = name.or(last).expect("a name before a nameless value");
                fields.append(name.clone(), value);
                last = Some(name);
            }
            other => pseudo.push(other.reify().expect("a pseudo-header field")),
        }
    }
    let decoded = pseudo
        .iter()
        .cloned()
        .chain(fields.iter().map(|(name, value)| Header::Field {
            name: name.clone(),
            value: value.clone(),
        }))
        .collect();
    (pseudo, fields, decoded)
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::hpack::Decoder;
    use http::header::HeaderValue;
    use http::*;

    #[test]
    fn fields_in_the_static_table_with_their_value_are_one_index() {
        let mut encoder = Encoder::default();
        assert_eq!(*encode(&mut encoder, vec![method("GET")]), [0x80 | 2]);
        assert_eq!(*encode(&mut encoder, vec![Header::Status(StatusCode::OK)]), [0x80 | 8]);
    }

    #[test]
    fn a_static_name_is_indexed_and_its_value_sent_raw_every_time() {
        let mut encoder = Encoder::default();
        for _ in 0..2 {
            let res = encode(&mut encoder, vec![header("cache-control", "max-age=60")]);
            // Literal without indexing, name 24: over the 4-bit prefix, so 15 and then 24 - 15.
            assert_eq!(res[..2], [0x0f, 24 - 15]);
            assert_eq!(res[2], 10); // raw string, 10 octets
            assert_eq!(&res[3..], b"max-age=60");
        }
    }

    #[test]
    fn a_name_outside_the_static_table_is_sent_as_a_string() {
        let mut encoder = Encoder::default();
        let res = encode(&mut encoder, vec![header("x-cache", "HIT")]);
        assert_eq!(*res, *b"\x00\x07x-cache\x03HIT");
    }

    #[test]
    fn sensitive_values_are_never_indexed() {
        let mut value = HeaderValue::from_static("12345");
        value.set_sensitive(true);
        let mut encoder = Encoder::default();
        let res = encode(
            &mut encoder,
            vec![Header::Field { name: Some(header::AUTHORIZATION), value: value.clone() }],
        );
        assert_eq!(*res, *b"\x1f\x08\x0512345");
        let res = encode(
            &mut encoder,
            vec![Header::Field { name: Some("my-password".parse().unwrap()), value }],
        );
        assert_eq!(*res, *b"\x10\x0bmy-password\x0512345");
    }

    #[test]
    fn long_values_and_repeated_names_decode_as_they_were_given() {
        let long = "v".repeat(300);
        let fields = vec![
            header("set-cookie", "a=1"),
            Header::Field { name: None, value: HeaderValue::from_static("b=2") },
            header("x-long", &long),
            Header::Field { name: None, value: HeaderValue::from_str(&long).unwrap() },
            Header::Status(StatusCode::IM_A_TEAPOT),
        ];
        let mut encoder = Encoder::default();
        let mut decoder = Decoder::new(4096);
        for _ in 0..2 {
            let mut block = encode(&mut encoder, fields.clone());
            let mut decoded = vec![];
            decoder
                .decode(&mut std::io::Cursor::new(&mut block), |h| {
                    decoded.push(h);
                    std::ops::ControlFlow::Continue(())
                })
                .unwrap();
            let named = [
                ("set-cookie", "a=1"),
                ("set-cookie", "b=2"),
                ("x-long", long.as_str()),
                ("x-long", long.as_str()),
            ];
            let named = named
                .iter()
                .map(|(n, v)| Header::Field { name: n.parse().unwrap(), value: v.parse().unwrap() });
            // The pseudo-header fields come first, as RFC 9113 section 8.3 requires.
            let expected: Vec<Header> =
                [Header::Status(StatusCode::IM_A_TEAPOT)].into_iter().chain(named).collect();
            assert_eq!(decoded, expected);
        }
    }

    #[test]
    fn a_lowered_table_size_is_acknowledged_once() {
        let mut encoder = Encoder::default();
        encoder.update_max_size(0);
        assert_eq!(*encode(&mut encoder, vec![method("GET")]), [0b0010_0000, 0x80 | 2]);
        assert_eq!(*encode(&mut encoder, vec![method("GET")]), [0x80 | 2]);
    }

    #[test]
    fn test_update_max_size_combos() {
        let mut encoder = Encoder::default();
        assert!(encoder.size_update.is_none());
        assert_eq!(4096, encoder.max_size);

        encoder.update_max_size(4096); // Default size
        assert!(encoder.size_update.is_none());

        encoder.update_max_size(0);
        assert_eq!(Some(SizeUpdate::One(0)), encoder.size_update);

        encoder.update_max_size(100);
        assert_eq!(Some(SizeUpdate::Two(0, 100)), encoder.size_update);

        let mut encoder = Encoder::default();
        encoder.max_allowed_size = 8000;
        encoder.update_max_size(8000);
        assert_eq!(Some(SizeUpdate::One(8000)), encoder.size_update);

        encoder.update_max_size(100);
        assert_eq!(Some(SizeUpdate::One(100)), encoder.size_update);

        encoder.update_max_size(8000);
        assert_eq!(Some(SizeUpdate::Two(100, 8000)), encoder.size_update);

        encoder.update_max_size(4000);
        assert_eq!(Some(SizeUpdate::Two(100, 4000)), encoder.size_update);

        encoder.update_max_size(50);
        assert_eq!(Some(SizeUpdate::One(50)), encoder.size_update);
    }

    fn encode(e: &mut Encoder, hdrs: Vec<Header<Option<HeaderName>>>) -> BytesMut {
        let (pseudo, fields, _) = split_block(hdrs);
        let mut dst = BytesMut::with_capacity(1024);
        e.encode(pseudo, &fields, &mut dst);
        dst
    }

    fn method(s: &str) -> Header<Option<HeaderName>> {
        Header::Method(Method::from_bytes(s.as_bytes()).unwrap())
    }

    fn header(name: &str, val: &str) -> Header<Option<HeaderName>> {
        let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
        let value = HeaderValue::from_bytes(val.as_bytes()).unwrap();

        Header::Field {
            name: Some(name),
            value,
        }
    }
}
