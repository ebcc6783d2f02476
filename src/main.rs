//! `switchboard`: the one binary. `dev` runs every component in one process; `serve` runs
//! one component as a Kubernetes Deployment would; `admin` manages teams, keys and credits
//! directly in the identity database; `migrate` applies database migrations.

mod admin;
mod components;
mod config;
mod dev;
mod health_check;
mod readiness;
mod seed;
mod serve;
mod session;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// The gateway and the services allocate a little for every request (headers, protobuf
/// messages, JSON): glibc's malloc and free were about 8% of the process in profiles of
/// `GET /me`; mimalloc serves small allocations from thread-local free lists.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "switchboard", version, about = "Self-hostable backend for voice and chat AI agents")]
struct Cli {
    /// TOML config file (also SWITCHBOARD_CONFIG).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every component in one process with embedded defaults.
    Dev {
        /// Where the SQLite databases live (default .data, or SWITCHBOARD_DATA_DIR).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// HTTP address of the gateway (default SWITCHBOARD_LISTEN, else the config file's
        /// `[gateway] listen`, else 127.0.0.1:8080); port 0 picks a free port.
        #[arg(long)]
        listen: Option<String>,
    },
    /// Run one component, configured by the environment.
    Serve {
        #[arg(value_parser = serve::component_names())]
        component: String,
    },
    /// Manage teams, keys and credits (prints JSON).
    Admin {
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Identity database URL (default: DATABASE_URL, else SQLite in the data directory).
        #[arg(long)]
        database_url: Option<String>,
        #[command(subcommand)]
        command: admin::AdminCommand,
    },
    /// Print the OpenAPI 3.1 description the gateway serves at /v1/openapi.json.
    Openapi,
    /// Ask a service's gRPC health; exit 0 when it is serving (the probe of clusters without
    /// gRPC probes).
    Health {
        /// The service's gRPC address, e.g. 127.0.0.1:50052.
        address: String,
    },
    /// Apply the database migrations of a component and exit.
    Migrate {
        #[arg(value_parser = serve::component_names())]
        component: String,
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let file = config::load_file(cli.config.as_deref())?;
        match cli.command {
            Command::Dev { data_dir, listen } => dev::run(file, data_dir.as_deref(), listen).await,
            Command::Serve { component } => serve::run(file, &component).await,
            Command::Admin { data_dir, database_url, command } => {
                admin::run(&file, data_dir.as_deref(), database_url, command).await
            }
            Command::Migrate { component, data_dir } => serve::migrate(&file, &component, data_dir.as_deref()).await,
            Command::Health { address } => health_check::check(&address).await,
            Command::Openapi => {
                let document = switchboard_gateway::openapi::document_bytes()?;
                std::io::Write::write_all(&mut std::io::stdout(), &document).context("writing to stdout")?;
                Ok(())
            }
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
