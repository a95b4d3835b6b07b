use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;

use super::{ProxyBody, SharedBody, StoredBody};

/// The data frames `body` sends, in order.
async fn frames(mut body: ProxyBody) -> Vec<Bytes> {
    let mut frames = Vec::new();
    while let Some(frame) = body.frame().await {
        frames.push(frame.unwrap().into_data().unwrap());
    }
    frames
}

fn joined(frames: &[Bytes]) -> Vec<u8> {
    frames.concat()
}

#[tokio::test]
async fn a_body_of_one_chunk_and_one_of_several_serve_the_same_bytes_and_ranges() {
    let one = StoredBody::from(Bytes::from_static(b"0123456789"));
    let (filled, _reader) = SharedBody::with_reader(None);
    for part in ["012", "3456", "789"] {
        filled.push(Bytes::from_static(part.as_bytes()));
    }
    let several = filled.stored();
    for (body, chunks) in [(&one, 1), (&several, 3)] {
        assert_eq!(body.len(), 10);
        let whole = frames(body.to_body()).await;
        assert_eq!(whole.len(), chunks, "sent as stored, chunk by chunk");
        assert_eq!(joined(&whole), b"0123456789");
        let (range, len) = body.range_body(2..8);
        assert_eq!(len, 6);
        assert_eq!(joined(&frames(range).await), b"234567");
        assert_eq!(joined(&body.range_parts(9..20)), b"9", "clamped to the body");
    }
}

#[tokio::test]
async fn an_empty_stored_body_sends_no_frame() {
    let (filled, _reader) = SharedBody::with_reader(Some(0));
    for body in [
        StoredBody::default(),
        StoredBody::from(Bytes::new()),
        filled.stored(),
    ] {
        assert_eq!(body.len(), 0);
        let sent = body.to_body();
        assert!(sent.is_end_stream());
        assert!(frames(sent).await.is_empty());
    }
}
