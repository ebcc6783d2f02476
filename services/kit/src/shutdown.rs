//! SIGTERM and SIGINT for the components that run on plain tokio (the gateway gets its signals
//! from pingora).
//!
//! [`Signals::listen`] takes the signals over at once, before the process says it is ready: a
//! SIGTERM sent right after `dev` printed "Stop with Ctrl-C." used to arrive before the handler
//! was installed and kill the process (exit by signal, not 0).

use tokio::signal::unix::{self, Signal, SignalKind};

/// SIGTERM and SIGINT, listened to from [`Signals::listen`] on; one that arrives before
/// [`Signals::wait`] is kept.
pub struct Signals {
    terminate: Option<Signal>,
    interrupt: Option<Signal>,
}

impl Signals {
    /// Must run inside the tokio runtime. A signal that cannot be listened to is logged, and
    /// then never ends the wait.
    pub fn listen() -> Self {
        let listen = |kind: SignalKind, name: &str| match unix::signal(kind) {
            Ok(stream) => Some(stream),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for {name}");
                None
            }
        };
        Signals {
            terminate: listen(SignalKind::terminate(), "SIGTERM"),
            interrupt: listen(SignalKind::interrupt(), "SIGINT"),
        }
    }

    /// Completes at the first SIGTERM or SIGINT since [`Signals::listen`].
    pub async fn wait(mut self) {
        tokio::select! {
            _ = recv(&mut self.terminate) => tracing::info!("SIGTERM received, shutting down"),
            _ = recv(&mut self.interrupt) => tracing::info!("SIGINT received, shutting down"),
        }
    }
}

async fn recv(stream: &mut Option<Signal>) {
    match stream {
        Some(stream) => {
            stream.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}

/// Listens from now on and completes at the first SIGTERM or SIGINT.
pub async fn signal() {
    Signals::listen().wait().await
}
