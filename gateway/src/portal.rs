//! The web portal, served on the API's origin so that the session cookie needs no CORS: the
//! files of `portal/assets/` are compiled into the binary. `/assets/<file>` serves a file;
//! any other GET outside the API (`/`, `/sign-in`, `/keys`, `/invite/<token>`, ...) serves
//! `index.html`, whose script routes on the path. The portal is a client of `/v1` like any
//! other: it has no way to the data but the public API.
//!
//! Files are sent gzip-compressed when the browser accepts it (compressed once, at start),
//! with an `ETag` so that a revisit costs a 304. Pages carry a strict Content-Security-Policy:
//! scripts and styles of this origin only, no inline code, nothing from anywhere else.

use std::sync::LazyLock;

use bytes::Bytes;
use pingora::http::RequestHeader;
use switchboard_kit::ServiceError;

use crate::reply::Reply;

/// Every file of `portal/assets/`, with its type. A test checks that the directory holds
/// exactly these.
const FILES: &[(&str, &str, &[u8])] = &[
    ("index.html", "text/html; charset=utf-8", include_bytes!("../../portal/assets/index.html")),
    ("app.css", "text/css; charset=utf-8", include_bytes!("../../portal/assets/app.css")),
    ("app.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/app.js")),
    ("api.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/api.js")),
    ("reauth.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/reauth.js")),
    ("dom.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/dom.js")),
    ("pages-auth.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-auth.js")),
    ("pages-team.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-team.js")),
    ("pages-agents.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-agents.js")),
    ("pages-agents.css", "text/css; charset=utf-8", include_bytes!("../../portal/assets/pages-agents.css")),
    ("agent-try.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/agent-try.js")),
    ("pages-knowledge.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-knowledge.js")),
    ("pages-knowledge.css", "text/css; charset=utf-8", include_bytes!("../../portal/assets/pages-knowledge.css")),
    ("pages-calls.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-calls.js")),
    ("pages-calls.css", "text/css; charset=utf-8", include_bytes!("../../portal/assets/pages-calls.css")),
    ("pages-analytics.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-analytics.js")),
    ("pages-analytics.css", "text/css; charset=utf-8", include_bytes!("../../portal/assets/pages-analytics.css")),
    ("pages-contacts.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-contacts.js")),
    ("pages-contacts.css", "text/css; charset=utf-8", include_bytes!("../../portal/assets/pages-contacts.css")),
    ("pages-import.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-import.js")),
    (
        "pages-contact-settings.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../portal/assets/pages-contact-settings.js"),
    ),
    ("pages-boards.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-boards.js")),
    ("pages-boards.css", "text/css; charset=utf-8", include_bytes!("../../portal/assets/pages-boards.css")),
    ("pages-webhooks.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-webhooks.js")),
    ("pages-webhooks.css", "text/css; charset=utf-8", include_bytes!("../../portal/assets/pages-webhooks.css")),
    ("passkeys.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/passkeys.js")),
    ("pages-security.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-security.js")),
    ("pages-profile.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/pages-profile.js")),
    ("pages-account.css", "text/css; charset=utf-8", include_bytes!("../../portal/assets/pages-account.css")),
    ("charts.js", "text/javascript; charset=utf-8", include_bytes!("../../portal/assets/charts.js")),
    ("logo.svg", "image/svg+xml", include_bytes!("../../portal/assets/logo.svg")),
];

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
    connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

struct Asset {
    content_type: &'static str,
    plain: Bytes,
    gzip: Bytes,
    etag: String,
}

static ASSETS: LazyLock<Vec<(&'static str, Asset)>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|(name, content_type, bytes)| {
            let digest = <sha2::Sha256 as sha2::Digest>::digest(bytes);
            let asset = Asset {
                content_type,
                plain: Bytes::from_static(bytes),
                gzip: Bytes::from(crate::compression::gzip(bytes)),
                etag: format!("\"{}\"", hex::encode(&digest[..12])),
            };
            (*name, asset)
        })
        .collect()
});

/// `SWITCHBOARD_PORTAL_DIR`: a development aid. The files are read from this folder at every
/// request instead of from the binary, so that a change to the portal shows on reload without a
/// rebuild. Never set in production: nothing is compressed or checked.
static DEV_DIR: LazyLock<Option<std::path::PathBuf>> =
    LazyLock::new(|| std::env::var_os("SWITCHBOARD_PORTAL_DIR").filter(|dir| !dir.is_empty()).map(Into::into));

fn from_disk(dir: &std::path::Path, name: &str) -> Result<Asset, ServiceError> {
    let missing = || ServiceError::not_found("No such portal file");
    let content_type = match name.rsplit_once('.').map(|(_, extension)| extension) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        _ => return Err(missing()),
    };
    // A flat folder: no way out of it.
    if name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(missing());
    }
    let bytes = std::fs::read(dir.join(name)).map_err(|_| missing())?;
    let digest = <sha2::Sha256 as sha2::Digest>::digest(&bytes);
    let plain = Bytes::from(bytes);
    Ok(Asset { content_type, gzip: plain.clone(), plain, etag: format!("\"{}\"", hex::encode(&digest[..12])) })
}

/// Paths that belong to the API and the documents, never to the portal.
fn is_api(path: &str) -> bool {
    path == "/v1" || path.starts_with("/v1/") || path == "/mcp" || path.starts_with("/mcp/")
}

/// The portal's answer to a GET or HEAD of `path`, or `None` when the path is not the portal's.
pub fn serve(method: &str, header: &RequestHeader) -> Option<Result<Reply, ServiceError>> {
    let path = header.uri.path();
    if !matches!(method, "GET" | "HEAD") || is_api(path) {
        return None;
    }
    let name = path.strip_prefix("/assets/").unwrap_or("index.html");
    if let Some(dir) = DEV_DIR.as_deref() {
        return Some(from_disk(dir, name).map(|asset| reply(&asset, header)));
    }
    let Some((_, asset)) = ASSETS.iter().find(|(known, _)| *known == name) else {
        return Some(Err(ServiceError::not_found("No such portal file")));
    };
    Some(Ok(reply(asset, header)))
}

fn reply(asset: &Asset, header: &RequestHeader) -> Reply {
    let value = |name: &str| header.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
    let secured = |reply: Reply| {
        reply
            .with_header("ETag", asset.etag.clone())
            .with_header("Cache-Control", "no-cache".to_owned())
            .with_header("Vary", "Accept-Encoding".to_owned())
            .with_header("Content-Security-Policy", CSP.to_owned())
            .with_header("X-Content-Type-Options", "nosniff".to_owned())
            // Invitation and reset tokens are in page paths: never sent on to another origin.
            .with_header("Referrer-Policy", "same-origin".to_owned())
            .with_header("X-Frame-Options", "DENY".to_owned())
    };
    if value("if-none-match").split(',').any(|tag| tag.trim() == asset.etag) {
        return secured(Reply::raw(304, asset.content_type, Bytes::new()));
    }
    let accepts_gzip = asset.gzip != asset.plain && crate::compression::accepts_gzip(header);
    if accepts_gzip {
        return secured(Reply::raw(200, asset.content_type, asset.gzip.clone()))
            .with_header("Content-Encoding", "gzip".to_owned());
    }
    secured(Reply::raw(200, asset.content_type, asset.plain.clone()))
}

/// The bytes a first visit downloads, compressed: every script, style and image of the portal.
pub fn first_visit_bytes() -> (usize, usize) {
    ASSETS.iter().fold((0, 0), |(plain, gzip), (_, asset)| (plain + asset.plain.len(), gzip + asset.gzip.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_portal_is_served() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../portal/assets");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .expect("portal/assets")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut served: Vec<String> = FILES.iter().map(|(name, _, _)| (*name).to_owned()).collect();
        served.sort();
        assert_eq!(on_disk, served, "list every file of portal/assets in FILES");
    }

    #[test]
    fn the_first_visit_is_small() {
        let (plain, gzip) = first_visit_bytes();
        assert!(gzip < plain && gzip < 200 * 1024, "{gzip} bytes compressed, {plain} plain");
    }

    /// The API paths the portal calls, e.g. `/v1/members/{}` for `/v1/members/${id}`.
    fn called_paths() -> Vec<String> {
        let mut paths = Vec::new();
        for (name, _, bytes) in FILES.iter().filter(|(name, _, _)| name.ends_with(".js")) {
            let text = std::str::from_utf8(bytes).unwrap_or_else(|_| panic!("{name} is UTF-8"));
            for (at, _) in text.match_indices("/v1/") {
                // Only string literals: comments may name paths too.
                if !text[..at].ends_with(['\'', '"', '`']) {
                    continue;
                }
                let rest = &text[at..];
                let end = rest.find(['\'', '"', '`', '?']).unwrap_or(rest.len());
                let mut path = String::new();
                let mut chars = rest[..end].chars().peekable();
                while let Some(c) = chars.next() {
                    if c == '$' && chars.peek() == Some(&'{') {
                        path.push_str("{}");
                        for inner in chars.by_ref() {
                            if inner == '}' {
                                break;
                            }
                        }
                    } else {
                        path.push(c);
                    }
                }
                paths.push(path);
            }
        }
        paths
    }

    /// The portal is plain JavaScript without generated types: this is what fails when it and
    /// the API drift apart (a path it calls that the API does not serve).
    #[test]
    fn every_path_the_portal_calls_is_in_the_api() {
        let document: serde_json::Value =
            serde_json::from_slice(&crate::openapi::document_bytes().expect("the OpenAPI document")).expect("JSON");
        let templates: Vec<Vec<String>> = document["paths"]
            .as_object()
            .expect("paths")
            .keys()
            .map(|path| format!("/v1{path}").split('/').map(str::to_owned).collect())
            .collect();
        let called = called_paths();
        assert!(called.len() >= 10, "{called:?}");
        for path in called {
            // A path ending in `/` is a prefix the portal tests paths against.
            let prefix = path.ends_with('/');
            let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
            let known = templates.iter().any(|template| {
                (template.len() == segments.len() || (prefix && template.len() > segments.len()))
                    && template.iter().zip(&segments).all(|(t, s)| t == s || (t.starts_with('{') && !s.is_empty()))
            });
            assert!(known, "the portal calls {path}, which the API does not serve");
        }
    }
}
