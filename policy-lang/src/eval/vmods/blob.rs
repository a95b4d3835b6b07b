//! `blob.*` (Varnish's vmod_blob): bytes decoded from and encoded to text (IDENTITY, BASE64,
//! BASE64URL, BASE64URLNOPAD, BASE64CF, HEX, URL). A BLOB travels as lowercase hex digits.

use std::borrow::Cow;
use std::fmt::Write;

use crate::compile::Program;
use crate::eval::Context;
use crate::tree::{BlobFn, Expr};
use crate::vocab::Value;

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const CF: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-~";

pub(super) fn value<'a>(p: &'a Program, f: BlobFn, args: &'a [Expr], ctx: &'a dyn Context) -> Value<'a> {
    let word = |i: usize, default: &'a str| match p.string_arg(args, i, ctx) {
        w if w.is_empty() => Cow::Borrowed(default),
        w => w,
    };
    let length = |i: usize| args.get(i).and_then(|e| p.eval(e, ctx).as_int()).unwrap_or(0);
    let text = match f {
        // decoding, length, encoded -> the bytes as hex.
        BlobFn::Decode => {
            decode(&word(0, "IDENTITY"), length(1), &p.string_arg(args, 2, ctx)).map(|b| hex(&b, false))
        }
        // encoding, case, blob.
        BlobFn::Encode => {
            let bytes = unhex(&p.string_arg(args, 2, ctx)).unwrap_or_default();
            encode(&word(0, "IDENTITY"), &word(1, "DEFAULT"), &bytes)
        }
        // decoding, encoding, case, length, encoded.
        BlobFn::Transcode => decode(&word(0, "IDENTITY"), length(3), &p.string_arg(args, 4, ctx))
            .and_then(|bytes| encode(&word(1, "IDENTITY"), &word(2, "DEFAULT"), &bytes)),
    };
    // Varnish fails the VCL on an illegal encoding; here the result is unset.
    text.map_or(Value::Unset, |t| Value::Str(Cow::Owned(t)))
}

/// The bytes `encoded` (its first `length` characters when `length` > 0) stands for.
fn decode(decoding: &str, length: i64, encoded: &str) -> Option<Vec<u8>> {
    let encoded = match usize::try_from(length) {
        Ok(n) if n > 0 && n < encoded.len() => encoded.get(..n)?,
        _ => encoded,
    };
    match decoding {
        "IDENTITY" => Some(encoded.as_bytes().to_vec()),
        "BASE64" => base64_decode(encoded, STANDARD, b'='),
        "BASE64URL" | "BASE64URLNOPAD" => base64_decode(encoded, URL_SAFE, b'='),
        "BASE64CF" => base64_decode(encoded, CF, b'_'),
        "HEX" => unhex(encoded),
        "URL" => url_decode(encoded),
        _ => None,
    }
}

/// `bytes` as text; `None` for a `case` other than DEFAULT on encodings without hex digits.
fn encode(encoding: &str, case: &str, bytes: &[u8]) -> Option<String> {
    let upper = case == "UPPER";
    if !matches!(encoding, "HEX" | "URL") && case != "DEFAULT" {
        return None;
    }
    Some(match encoding {
        "IDENTITY" => String::from_utf8_lossy(bytes).into_owned(),
        "BASE64" => base64_encode(bytes, STANDARD, Some('=')),
        "BASE64URL" => base64_encode(bytes, URL_SAFE, Some('=')),
        "BASE64URLNOPAD" => base64_encode(bytes, URL_SAFE, None),
        "BASE64CF" => base64_encode(bytes, CF, Some('_')),
        "HEX" => hex(bytes, upper),
        "URL" => url_encode(bytes, upper),
        _ => return None,
    })
}

fn base64_encode(bytes: &[u8], alphabet: &[u8; 64], pad: Option<char>) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(alphabet[(n >> (18 - 6 * i) & 0x3f) as usize]));
        }
        if let Some(pad) = pad {
            out.extend(std::iter::repeat_n(pad, 3 - chunk.len()));
        }
    }
    out
}

/// Padding is optional; anything outside the alphabet (whitespace included) is illegal.
fn base64_decode(text: &str, alphabet: &[u8; 64], pad: u8) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    let digits = &digits[..digits.iter().rposition(|b| *b != pad).map_or(0, |i| i + 1)];
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        if chunk.len() == 1 {
            return None;
        }
        let mut n = 0u32;
        for (i, d) in chunk.iter().enumerate() {
            let v = alphabet.iter().position(|a| a == d)?;
            n |= (v as u32) << (18 - 6 * i);
        }
        out.extend(n.to_be_bytes()[1..chunk.len()].iter());
    }
    Some(out)
}

pub(crate) fn hex(bytes: &[u8], upper: bool) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = if upper {
            write!(out, "{b:02X}")
        } else {
            write!(out, "{b:02x}")
        };
    }
    out
}

/// Hex digits in either case; an odd count reads as if a `0` came first.
fn unhex(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text
        .chars()
        .map(|c| c.to_digit(16).map(|d| d as u8))
        .collect::<Option<_>>()?;
    let odd = digits.len() % 2;
    let mut out = Vec::with_capacity(digits.len() / 2 + odd);
    if odd == 1 {
        out.push(digits[0]);
    }
    out.extend(digits[odd..].chunks(2).map(|pair| pair[0] << 4 | pair[1]));
    Some(out)
}

/// RFC 3986 percent-encoding: all but the unreserved characters.
fn url_encode(bytes: &[u8], upper: bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    for b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(*b));
        } else {
            out.push('%');
            out.push_str(&hex(&[*b], upper));
        }
    }
    out
}

/// `%XX` to its byte; a `%` without two hex digits is illegal.
fn url_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let pair = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(pair, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestContext;
    use crate::{load_str, Scope, Sub};

    /// What `expr` sets `resp.http.x` to in `vcl_deliver`.
    fn deliver(expr: &str) -> Option<String> {
        let src = format!(
            "vcl 4.1;\nimport blob;\nbackend default {{ .host = \"127.0.0.1\"; }}\nsub vcl_deliver {{ set resp.http.x = {expr}; }}\n"
        );
        let program = load_str("blob.vcl", &src).unwrap_or_else(|d| panic!("{}", d.render()));
        let mut ctx = TestContext::request("GET", "/");
        program.run(Sub::Deliver, &mut ctx);
        ctx.get_header(Scope::Resp, "x")
    }

    // The examples of Varnish 7.7's vmod_blob documentation.
    #[test]
    fn the_documented_examples() {
        for (expr, want) in [
            (
                "blob.encode(HEX, blob=blob.decode(BASE64, encoded=\"Zm9vYmFyYmF6\"))",
                "666f6f62617262617a",
            ),
            (
                "blob.encode(blob=blob.decode(encoded=\"Zm9vYmFyYmF6\", decoding=BASE64), encoding=HEX)",
                "666f6f62617262617a",
            ),
            ("blob.encode(blob=blob.decode(encoded=\"foo\"))", "foo"),
            (
                "blob.transcode(decoding=BASE64, encoding=HEX, case=UPPER, encoded=\"YmF6\")",
                "62617A",
            ),
            ("blob.transcode(HEX, BASE64, encoded=\"666f6f\")", "Zm9v"),
            (
                "blob.transcode(encoded=\"666f6f\", encoding=BASE64, decoding=HEX)",
                "Zm9v",
            ),
            ("blob.transcode(encoded=\"foo%20bar\", decoding=URL)", "foo bar"),
            ("blob.transcode(encoded=\"foo bar\", encoding=URL)", "foo%20bar"),
            // "abcdef0" is decoded as "0abcdef0".
            (
                "blob.encode(HEX, blob=blob.decode(HEX, encoded=\"abc\" + \"def0\"))",
                "0abcdef0",
            ),
            (
                "blob.encode(BASE64, blob=blob.decode(encoded=\"blob\"))",
                "YmxvYg==",
            ),
        ] {
            assert_eq!(deliver(expr).as_deref(), Some(want), "{expr}");
        }
    }

    #[test]
    fn base64_variants_round_trip() {
        let bytes: Vec<u8> = (0..=255).collect();
        for (encoding, alphabet, pad) in [
            ("BASE64", STANDARD, Some('=')),
            ("BASE64URL", URL_SAFE, Some('=')),
            ("BASE64URLNOPAD", URL_SAFE, None),
            ("BASE64CF", CF, Some('_')),
        ] {
            for n in 0..6 {
                let text = base64_encode(&bytes[250 - n..], alphabet, pad);
                assert_eq!(
                    decode(encoding, 0, &text).as_deref(),
                    Some(&bytes[250 - n..]),
                    "{encoding} {text}"
                );
            }
        }
        assert_eq!(base64_encode(b"\xfb\xff", URL_SAFE, None), "-_8");
        assert_eq!(base64_encode(b"\xfb\xff", STANDARD, Some('=')), "+/8=");
    }

    #[test]
    fn illegal_input_and_case_are_refused() {
        assert_eq!(decode("BASE64", 0, "Zm9v YmFy"), None);
        assert_eq!(decode("HEX", 0, "0x66"), None);
        assert_eq!(decode("URL", 0, "100%"), None);
        assert_eq!(encode("BASE64", "UPPER", b"x"), None);
        assert_eq!(
            deliver("blob.transcode(decoding=HEX, encoded=\"zz\")"),
            Some(String::new())
        );
        // `length` decodes only the first characters.
        assert_eq!(decode("IDENTITY", 3, "foobar").as_deref(), Some(&b"foo"[..]));
    }
}
