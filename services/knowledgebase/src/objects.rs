//! Object storage for uploaded files: a local directory by default, an S3-compatible
//! bucket in production. Files are written once and never changed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use object_store::path::Path;
use object_store::{ObjectStore, RetryConfig};

/// An upload waits for its file to be stored: a bucket that keeps failing is reported after
/// seconds (a 503 the client may retry), not after object_store's default three minutes.
fn retry() -> RetryConfig {
    RetryConfig { max_retries: 3, retry_timeout: Duration::from_secs(10), ..RetryConfig::default() }
}

#[derive(Debug, Clone)]
pub enum ObjectsConfig {
    /// A directory on local disk (created when missing).
    Local(PathBuf),
    /// An S3-compatible bucket; credentials and region come from the usual `AWS_*`
    /// variables.
    S3 { bucket: String, endpoint: Option<String> },
}

#[derive(Clone)]
pub struct Objects {
    store: Arc<dyn ObjectStore>,
}

impl Objects {
    pub fn open(config: &ObjectsConfig) -> anyhow::Result<Self> {
        let store: Arc<dyn ObjectStore> = match config {
            ObjectsConfig::Local(dir) => {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
                Arc::new(
                    object_store::local::LocalFileSystem::new_with_prefix(dir)
                        .with_context(|| format!("opening object storage at {}", dir.display()))?,
                )
            }
            ObjectsConfig::S3 { bucket, endpoint } => {
                let mut builder =
                    object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket).with_retry(retry());
                if let Some(endpoint) = endpoint {
                    builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
                }
                Arc::new(builder.build().with_context(|| format!("opening the S3 bucket {bucket}"))?)
            }
        };
        Ok(Self { store })
    }

    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> anyhow::Result<()> {
        self.store.put(&Path::from(key), bytes.into()).await.with_context(|| format!("storing object {key}"))?;
        Ok(())
    }

    pub async fn get(&self, key: &str) -> anyhow::Result<Vec<u8>> {
        let found = self.store.get(&Path::from(key)).await.with_context(|| format!("reading object {key}"))?;
        Ok(found.bytes().await.with_context(|| format!("reading object {key}"))?.to_vec())
    }

    /// Removes an object; a missing one is not an error.
    pub async fn delete(&self, key: &str) -> anyhow::Result<()> {
        match self.store.delete(&Path::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error).with_context(|| format!("deleting object {key}")),
        }
    }
}

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

    #[tokio::test]
    async fn local_objects_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::open(&ObjectsConfig::Local(dir.path().join("objects"))).unwrap();
        objects.put("a/b/c.txt", b"hello".to_vec()).await.unwrap();
        assert_eq!(objects.get("a/b/c.txt").await.unwrap(), b"hello");
        objects.delete("a/b/c.txt").await.unwrap();
        objects.delete("a/b/c.txt").await.unwrap();
        assert!(objects.get("a/b/c.txt").await.is_err());
    }
}
