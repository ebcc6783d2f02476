//! Object storage for uploaded documents and call recordings: a local directory by default, an
//! S3-compatible bucket in production. Objects are written once and never changed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::aws::AmazonS3;
use object_store::path::Path;
use object_store::signer::Signer;
use object_store::{GetOptions, GetRange, ObjectStore, RetryConfig, WriteMultipart};

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
    /// The bucket, when objects live in S3: it signs URLs a browser can fetch directly.
    s3: Option<Arc<AmazonS3>>,
}

/// An object being written piece by piece; nothing is kept whole in memory (parts of a few MB
/// go out as they fill). Dropped without [`Writing::finish`], the upload is abandoned.
pub struct Writing {
    key: String,
    upload: WriteMultipart,
    written: u64,
}

impl Writing {
    pub async fn write(&mut self, bytes: Bytes) -> anyhow::Result<()> {
        // At most a few parts in flight: memory stays flat whatever the object's size.
        self.upload.wait_for_capacity(4).await.with_context(|| format!("storing object {}", self.key))?;
        self.written += bytes.len() as u64;
        self.upload.put(bytes);
        Ok(())
    }

    pub fn written(&self) -> u64 {
        self.written
    }

    pub async fn finish(self) -> anyhow::Result<u64> {
        self.upload.finish().await.with_context(|| format!("storing object {}", self.key))?;
        Ok(self.written)
    }

    pub async fn abort(self) {
        if let Err(error) = self.upload.abort().await {
            tracing::warn!(%error, key = self.key, "abandoning an upload failed");
        }
    }
}

impl Objects {
    pub fn open(config: &ObjectsConfig) -> anyhow::Result<Self> {
        match config {
            ObjectsConfig::Local(dir) => {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
                let local = object_store::local::LocalFileSystem::new_with_prefix(dir)
                    .with_context(|| format!("opening object storage at {}", dir.display()))?;
                Ok(Self { store: Arc::new(local), s3: None })
            }
            ObjectsConfig::S3 { bucket, endpoint } => {
                let mut builder =
                    object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket).with_retry(retry());
                if let Some(endpoint) = endpoint {
                    builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
                }
                let s3 = Arc::new(builder.build().with_context(|| format!("opening the S3 bucket {bucket}"))?);
                Ok(Self { store: s3.clone(), s3: Some(s3) })
            }
        }
    }

    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> anyhow::Result<()> {
        self.store.put(&Path::from(key), bytes.into()).await.with_context(|| format!("storing object {key}"))?;
        Ok(())
    }

    pub async fn get(&self, key: &str) -> anyhow::Result<Vec<u8>> {
        let found = self.store.get(&Path::from(key)).await.with_context(|| format!("reading object {key}"))?;
        Ok(found.bytes().await.with_context(|| format!("reading object {key}"))?.to_vec())
    }

    /// Starts writing an object in pieces.
    pub async fn writer(&self, key: &str) -> anyhow::Result<Writing> {
        let upload =
            self.store.put_multipart(&Path::from(key)).await.with_context(|| format!("storing object {key}"))?;
        Ok(Writing { key: key.to_owned(), upload: WriteMultipart::new(upload), written: 0 })
    }

    /// The bytes `range` of an object (all of it when `None`), as they are read, and the object's
    /// full size.
    pub async fn read(
        &self,
        key: &str,
        range: Option<std::ops::Range<u64>>,
    ) -> anyhow::Result<(u64, BoxStream<'static, anyhow::Result<Bytes>>)> {
        let options = GetOptions { range: range.map(GetRange::Bounded), ..GetOptions::default() };
        let found =
            self.store.get_opts(&Path::from(key), options).await.with_context(|| format!("reading object {key}"))?;
        let size = found.meta.size;
        let key = key.to_owned();
        let stream = found.into_stream().map(move |chunk| chunk.with_context(|| format!("reading object {key}")));
        Ok((size, stream.boxed()))
    }

    /// A URL that fetches the object without credentials until it expires, when the store can
    /// make one (S3); `None` for a local directory, whose objects the gateway serves itself.
    pub async fn signed_url(&self, key: &str, expires_in: Duration) -> anyhow::Result<Option<String>> {
        let Some(s3) = &self.s3 else {
            return Ok(None);
        };
        let url = s3
            .signed_url(http::Method::GET, &Path::from(key), expires_in)
            .await
            .with_context(|| format!("signing a URL for {key}"))?;
        Ok(Some(url.to_string()))
    }

    /// Removes an object; a missing one is not an error.
    pub async fn delete(&self, key: &str) -> anyhow::Result<()> {
        match self.store.delete(&Path::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error).with_context(|| format!("deleting object {key}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[tokio::test]
    async fn objects_are_written_in_pieces_and_read_in_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::open(&ObjectsConfig::Local(dir.path().join("objects"))).unwrap();
        let mut writing = objects.writer("r/1.wav").await.unwrap();
        for piece in [b"0123".as_slice(), b"4567", b"89"] {
            writing.write(Bytes::copy_from_slice(piece)).await.unwrap();
        }
        assert_eq!(writing.finish().await.unwrap(), 10);
        let (size, stream) = objects.read("r/1.wav", Some(2..6)).await.unwrap();
        let read: Vec<Bytes> = stream.map(|chunk| chunk.unwrap()).collect().await;
        assert_eq!((size, read.concat()), (10, b"2345".to_vec()));
        let (_, whole) = objects.read("r/1.wav", None).await.unwrap();
        assert_eq!(whole.map(|chunk| chunk.unwrap()).collect::<Vec<_>>().await.concat(), b"0123456789");
        assert_eq!(objects.signed_url("r/1.wav", Duration::from_secs(60)).await.unwrap(), None);
    }
}
