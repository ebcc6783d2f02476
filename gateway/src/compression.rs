//! gzip for what the gateway serves as files (the portal, the OpenAPI description, the skill
//! file): compressed once, when built, and sent compressed to a client that accepts it.

use bytes::Bytes;
use pingora::http::RequestHeader;

/// A body kept plain and gzip-compressed.
#[derive(Clone)]
pub struct Compressed {
    pub plain: Bytes,
    pub gzip: Bytes,
}

impl Compressed {
    pub fn new(plain: Bytes) -> Self {
        let gzip = Bytes::from(gzip(&plain));
        Self { plain, gzip }
    }

    /// The body for this request, and whether it is the compressed one (`Content-Encoding:
    /// gzip`). A compressed form no smaller than the plain one is never chosen.
    pub fn for_request(&self, header: &RequestHeader) -> (Bytes, bool) {
        if self.gzip.len() < self.plain.len() && accepts_gzip(header) {
            (self.gzip.clone(), true)
        } else {
            (self.plain.clone(), false)
        }
    }
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

/// Whether the request's `Accept-Encoding` names gzip.
pub fn accepts_gzip(header: &RequestHeader) -> bool {
    let value = header.headers.get("accept-encoding").and_then(|v| v.to_str().ok()).unwrap_or("");
    value.split(',').any(|coding| coding.trim().starts_with("gzip"))
}
