//! Where uploaded documents are kept: the shared object storage of `switchboard_kit::objects`,
//! under keys named after the document.

pub use switchboard_kit::objects::{Objects, ObjectsConfig};

/// The key of an uploaded file: its ids, then a file name safe for any store.
pub fn document_key(team_id: &str, knowledgebase_id: &str, document_id: &str, file_name: &str) -> String {
    let safe: String = file_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .take(100)
        .collect();
    let safe = safe.trim_start_matches('.');
    format!("{team_id}/{knowledgebase_id}/{document_id}/{}", if safe.is_empty() { "file" } else { safe })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_never_escape_their_folder() {
        assert_eq!(document_key("t", "k", "d", "../../etc/passwd"), "t/k/d/_.._etc_passwd");
        assert_eq!(document_key("t", "k", "d", "Résumé 2024.pdf"), "t/k/d/R_sum__2024.pdf");
        assert_eq!(document_key("t", "k", "d", "..."), "t/k/d/file");
    }
}
