//! gzip for what the gateway serves as files (the portal, the OpenAPI description, the skill
//! file): compressed once, and sent compressed to a client that accepts it.

use std::sync::OnceLock;

use bytes::Bytes;
use pingora::http::RequestHeader;

/// A body kept plain, and gzip-compressed the first time a client asks for it that way: the
/// description is close to 1 MB, and most gateways (and every test stack) never serve it
/// compressed, so start-up does not pay for it.
pub struct Compressed {
    plain: Bytes,
    gzip: OnceLock<Bytes>,
}

impl Compressed {
    pub fn new(plain: Bytes) -> Self {
        Self { plain, gzip: OnceLock::new() }
    }

    /// The body for this request, and whether it is the compressed one (`Content-Encoding:
    /// gzip`). A compressed form no smaller than the plain one is never chosen.
    pub fn for_request(&self, header: &RequestHeader) -> (Bytes, bool) {
        if accepts_gzip(header) {
            let gzip = self.gzip.get_or_init(|| Bytes::from(gzip(&self.plain)));
            if gzip.len() < self.plain.len() {
                return (gzip.clone(), true);
            }
        }
        (self.plain.clone(), false)
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
