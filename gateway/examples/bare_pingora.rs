//! The floor under the gateway's `GET /v1/me`: pingora answering every request with fixed
//! bytes from `request_filter`, the same way the gateway answers (no upstream, one header
//! block and one body), with nothing of ours on the path. `bench/gateway-me.sh` runs it beside
//! nginx and the gateway, so the share of nginx pingora itself reaches is known on each machine.
//!
//! Usage: `bare_pingora ADDRESS BODY_FILE`; prints `listening on ADDRESS` once it accepts.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::HttpPeer;
use pingora::proxy::{ProxyHttp, Session};
use pingora::server::configuration::ServerConf;
use pingora::services::Service as _;

/// The switchboard binary's allocator, so that the two differ only in what runs per request.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Fixed {
    body: Bytes,
}

#[async_trait]
impl ProxyHttp for Fixed {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn request_filter(&self, session: &mut Session, _ctx: &mut ()) -> pingora::Result<bool> {
        let mut header = ResponseHeader::build(200, Some(4))?;
        header.insert_header("Content-Type", "application/json")?;
        header.insert_header("Content-Length", self.body.len().to_string())?;
        header.insert_header("Cache-Control", "no-store")?;
        session.write_response_header(Box::new(header), false).await?;
        session.write_response_body(Some(self.body.clone()), true).await?;
        Ok(true)
    }

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> pingora::Result<Box<HttpPeer>> {
        Err(pingora::Error::new_str("no upstream"))
    }
}

/// Served as the gateway is (gateway/src/server.rs): pingora's no-steal runtime, one event loop
/// per core, each accepted connection staying on one of them.
fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(address), Some(body_file)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: bare_pingora ADDRESS BODY_FILE");
    };
    let body = Bytes::from(std::fs::read(&body_file)?);
    let threads = std::thread::available_parallelism()?.get();
    let loops = pingora_runtime::Runtime::new_no_steal(threads, "bare");
    let conf = Arc::new(ServerConf::default());
    let mut service = pingora::proxy::http_proxy_service(&conf, Fixed { body });
    service.add_tcp(&address);
    // Never stopped: the process is killed when the benchmark ends.
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let listening = loops.get_handle().spawn(async move { service.start_service(None, stopped, 1).await });
    println!("listening on {address}");
    // A runtime of its own only to wait on: the listener runs on the loops' threads.
    tokio::runtime::Builder::new_current_thread().build()?.block_on(listening)?;
    Ok(())
}
