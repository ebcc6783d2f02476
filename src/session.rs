//! What a running `switchboard dev` tells the other commands on this machine: where its gRPC
//! services listen and the service token they need. `dev` binds ephemeral ports and makes a
//! token per run, so `admin seed-demo` would otherwise need both copied from the banner. It also
//! names the Redis `dev` was given, for `admin`'s changes to teams to be announced there.
//! The file lives in the data directory, readable by its owner only, and goes when `dev` stops.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DevSession {
    pub pid: u32,
    pub api_base_url: String,
    /// gRPC URL by component name.
    pub services: BTreeMap<String, String>,
    pub service_token: Option<String>,
    /// The Redis `dev` uses, where `admin` announces the changes it makes to teams.
    #[serde(default)]
    pub redis_url: Option<String>,
}

fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("dev-session.json")
}

impl DevSession {
    pub fn write(&self, data_dir: &Path) -> anyhow::Result<()> {
        let path = path(data_dir);
        let bytes = serde_json::to_vec_pretty(self)?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&path).with_context(|| format!("creating {}", path.display()))?;
        std::io::Write::write_all(&mut file, &bytes).with_context(|| format!("writing {}", path.display()))
    }

    /// The session of a `dev` running on `data_dir`, if one is.
    pub fn read(data_dir: &Path) -> anyhow::Result<Option<DevSession>> {
        let path = path(data_dir);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let session: DevSession =
                    serde_json::from_slice(&bytes).with_context(|| format!("reading {}", path.display()))?;
                Ok(Some(session))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
        }
    }

    pub fn remove(data_dir: &Path) {
        let _ = std::fs::remove_file(path(data_dir));
    }
}
