//! The floors under the gateway, each a process of its own pinned like Arbor (the bench executes
//! its own binary with `--relay-serve KIND PORT UPSTREAM_PORT`):
//!
//! - `libraries`: a relay built from the libraries Arbor's gateway is built from (an actix-web
//!   server with one worker, reqwest to the upstream, both on tokio), which passes a streamed
//!   Chat Completions request to the mock and its answer back byte for byte: no token, no
//!   parsing, no database, no usage. Any server on these libraries costs at least that here.
//! - `bytes`: tokio alone, one upstream connection per client connection, each read from the
//!   upstream written to the client as it is (the HTTP/1.1 framing of the bench's mock passed
//!   through): a read and a write per chunk, what the kernel charges a proxy on this machine.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use actix_web::{App, HttpResponse, HttpServer, web};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{Res, fail, free_port, read_request};

/// The argument that makes the bench binary serve as a relay instead of measuring.
pub const SERVE_FLAG: &str = "--relay-serve";

/// Which floor.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Bytes,
    Libraries,
}

impl Kind {
    /// Every kind, in the order the bench runs them; [`Kind::index`] is a kind's place here.
    pub const ALL: [Kind; 2] = [Kind::Bytes, Kind::Libraries];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn arg(self) -> &'static str {
        match self {
            Kind::Libraries => "libraries",
            Kind::Bytes => "bytes",
        }
    }

    pub fn parse(arg: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.arg() == arg)
    }
}

struct Upstream {
    http: reqwest::Client,
    url: String,
}

/// `POST /v1/chat/completions`: the body to the upstream as it came, the answer back as it comes.
async fn relay(upstream: web::Data<Upstream>, body: web::Bytes) -> HttpResponse {
    let sent =
        upstream.http.post(&upstream.url).header("content-type", "application/json").body(body).send().await;
    match sent {
        Ok(res) => {
            let status = actix_web::http::StatusCode::from_u16(res.status().as_u16())
                .unwrap_or(actix_web::http::StatusCode::BAD_GATEWAY);
            HttpResponse::build(status).content_type("text/event-stream").streaming(res.bytes_stream())
        }
        Err(e) => HttpResponse::BadGateway().body(e.to_string()),
    }
}

/// Serves the relay of `kind` on `port` until killed (the body of `--relay-serve`).
pub fn serve(kind: Kind, port: u16, upstream_port: u16) -> std::process::ExitCode {
    // reqwest is built without a default TLS provider; as Arbor, install ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let served = match kind {
        Kind::Libraries => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .and_then(|rt| rt.block_on(serve_libraries(port, upstream_port))),
        // One thread, as Arbor's one worker.
        Kind::Bytes => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|rt| rt.block_on(serve_bytes(port, upstream_port))),
    };
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("relay: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve_libraries(port: u16, upstream_port: u16) -> std::io::Result<()> {
    // As Arbor's provider client: idle upstream connections kept, a few per host.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(32)
        .pool_idle_timeout(Duration::from_secs(20))
        .build()
        .map_err(std::io::Error::other)?;
    let upstream = web::Data::new(Upstream {
        http,
        url: format!("http://127.0.0.1:{upstream_port}/v1/chat/completions"),
    });
    HttpServer::new(move || {
        App::new()
            .app_data(upstream.clone())
            .route("/v1/chat/completions", web::post().to(relay))
            .route("/healthz", web::get().to(|| async { "ok" }))
    })
    .workers(1)
    .tcp_nodelay(true)
    .bind(("127.0.0.1", port))?
    .run()
    .await
}

async fn serve_bytes(port: u16, upstream_port: u16) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    loop {
        let (client, _) = listener.accept().await?;
        tokio::spawn(async move {
            if let Err(e) = pass_bytes(client, upstream_port).await {
                eprintln!("relay: {e}");
            }
        });
    }
}

/// The end of a chunked HTTP/1.1 body.
const LAST_CHUNK: &[u8] = b"\r\n0\r\n\r\n";

/// Requests from one client connection, each passed to the upstream connection kept for it, and
/// the answer's bytes back as they come until its last chunk. The health probe gets its answer
/// here; anything else is passed on as it is.
async fn pass_bytes(mut client: TcpStream, upstream_port: u16) -> Res<()> {
    client.set_nodelay(true)?;
    let mut upstream: Option<TcpStream> = None;
    let mut buf = vec![0u8; 16 * 1024];
    while let Some((head, body)) = read_request(&mut client).await? {
        if head.starts_with("GET /healthz ") {
            client.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await?;
            continue;
        }
        let up = match upstream.as_mut() {
            Some(up) => up,
            None => {
                let up = TcpStream::connect(("127.0.0.1", upstream_port)).await?;
                up.set_nodelay(true)?;
                upstream.insert(up)
            }
        };
        up.write_all(head.as_bytes()).await?;
        up.write_all(&body).await?;
        // The last bytes seen, to find the last chunk when it is split across two reads.
        let mut tail: Vec<u8> = Vec::with_capacity(2 * LAST_CHUNK.len());
        loop {
            let n = up.read(&mut buf).await?;
            if n == 0 {
                return Err(fail("the upstream closed the connection inside an answer"));
            }
            client.write_all(&buf[..n]).await?;
            tail.extend_from_slice(&buf[n.saturating_sub(LAST_CHUNK.len())..n]);
            if tail.ends_with(LAST_CHUNK) {
                break;
            }
            tail.drain(..tail.len().saturating_sub(LAST_CHUNK.len()));
        }
    }
    Ok(())
}

/// The relay's process, stopped when dropped.
pub struct Relay {
    child: Child,
    pub pid: u32,
    pub port: u16,
}

impl Relay {
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts this binary as the relay of `kind` in front of the mock on `upstream_port`, pinned to `cpus` as
/// Arbor is, and waits (10 s at most) until it answers.
pub async fn start(kind: Kind, cpus: Option<&str>, upstream_port: u16) -> Res<Relay> {
    let exe = std::env::current_exe()?;
    let port = free_port()?;
    let mut command = match cpus {
        Some(list) => {
            let mut c = Command::new("taskset");
            c.args(["-c", list]).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    let child = command
        .args([SERVE_FLAG, kind.arg(), &port.to_string(), &upstream_port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()?;
    // `taskset` executes the program in its own process: the PID is the relay's.
    let relay = Relay { pid: child.id(), child, port };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !http.get(format!("{}/healthz", relay.base())).send().await.is_ok_and(|r| r.status().is_success()) {
        if Instant::now() > deadline {
            return Err(fail(format!("the {} relay did not answer within 10 s", kind.arg())));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(relay)
}
