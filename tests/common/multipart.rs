//! The one way the tests build `multipart/form-data` bodies, as a browser's file upload sends
//! them: the framing (boundary lines, CRLFs, the closing delimiter) is written once, so that a
//! test fails for what the platform does with an upload, never for a body framed differently.

/// Never occurs in the tests' contents.
pub const BOUNDARY: &str = "switchboard-test-7MA4YWxkTrZu0gW";

/// One part of a form: a field, or a file.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    name: &'a str,
    file_name: Option<&'a str>,
    content_type: Option<&'a str>,
    content: &'a [u8],
}

impl<'a> Part<'a> {
    /// A plain field; `value` as bytes, so that a test can send one that is not UTF-8.
    pub fn field(name: &'a str, value: &'a [u8]) -> Part<'a> {
        Part { name, file_name: None, content_type: None, content: value }
    }

    /// A file as a browser sends one whose type it does not know (`application/octet-stream`).
    pub fn file(name: &'a str, file_name: &'a str, content: &'a [u8]) -> Part<'a> {
        Part { name, file_name: Some(file_name), content_type: Some("application/octet-stream"), content }
    }

    /// The part with this `Content-Type` instead.
    pub fn typed(self, content_type: &'a str) -> Part<'a> {
        Part { content_type: Some(content_type), ..self }
    }
}

/// The request's `Content-Type` and body for these parts, in order.
pub fn form(parts: &[Part<'_>]) -> (String, Vec<u8>) {
    let mut body = Vec::new();
    for part in parts {
        body.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{}\"", part.name).as_bytes(),
        );
        if let Some(file_name) = part.file_name {
            body.extend_from_slice(format!("; filename=\"{file_name}\"").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        if let Some(content_type) = part.content_type {
            body.extend_from_slice(format!("Content-Type: {content_type}\r\n").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(part.content);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={BOUNDARY}"), body)
}
