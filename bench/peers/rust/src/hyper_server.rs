//! `canopy_rust_peers hyper_server [--mode http|tls] [--threads T]
//! [--cert FILE --key FILE]`: the hyper peer of examples/http_hello, the
//! one bench/io/defaults_bench.py compares it with on fair terms.
//!
//! Unlike tokio_server's http mode, which only looks for the empty line
//! that ends a head, this is a full HTTP/1.1 server: hyper parses every
//! request (request line, headers, Content-Length or chunked bodies,
//! keep-alive and HTTP/1.0 rules) as http_hello does, and answers as
//! http_hello does: `GET /` (and HEAD, which hyper answers with the head
//! only) gets 200 with `Content-Type: text/plain` and `Hello, World!`, another
//! target 404 "Not Found", another method on `/` 405 "Method Not Allowed".
//! hyper 0.14 writes lower-case header names and always adds a `date`
//! header, which http_hello does not send: equivalent, not byte-identical.
//!
//! A multi-thread runtime of T workers (default: one per hardware thread,
//! as `#[tokio::main]`), a listener on 127.0.0.1 at a port the kernel picks
//! (printed as "listening on 127.0.0.1:PORT", the line the Canopy examples
//! print) and one task per connection, with TCP_NODELAY, keep-alive and
//! hyper's pipeline flush (the answers to pipelined requests leave in one
//! write, as http_hello writes them):
//!   http  plain HTTP/1.1;
//!   tls   the same over TLS 1.2/1.3 (rustls), with the certificate chain
//!         and private key (PKCS#8, PKCS#1 RSA or SEC1 EC) read from the
//!         PEM files --cert and --key name; ALPN offers http/1.1 only.
//!         rustls 0.20 (Debian 12's) refuses a ClientHello whose SNI is an
//!         IP address (alert decode_error), and wrk and `openssl s_client
//!         -servername` send the host they are given as SNI even when it is
//!         an address: address this server as `https://localhost:PORT/`
//!         (curl sends no SNI for an address, so `curl -k
//!         https://127.0.0.1:PORT/` works).
//! Runs until a signal ends the process (the bench sends SIGTERM). Exit
//! status 2 for a usage error, 1 when the runtime, the listener or the TLS
//! configuration cannot be set up (message on stderr).

use std::convert::Infallible;
use std::fs::File;
use std::io::BufReader;
use std::process::ExitCode;
use std::sync::Arc;

use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::Http;
use hyper::service::service_fn;
use hyper::{Body, Method, Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::runtime::Builder;
use tokio_rustls::rustls::{Certificate, PrivateKey, ServerConfig};
use tokio_rustls::TlsAcceptor;

const USAGE: &str =
    "usage: hyper_server [--mode http|tls] [--threads T] [--cert FILE --key FILE]\n\
     \x20 --cert, --key  PEM certificate chain and private key (required for tls)";

/// http_hello's routing (examples/http_hello.cpp, `hello`).
async fn answer(request: Request<Body>) -> Result<Response<Body>, Infallible> {
    let (status, body) = if request.uri().path() != "/" || request.uri().query().is_some() {
        (StatusCode::NOT_FOUND, "Not Found")
    } else if request.method() != Method::GET && request.method() != Method::HEAD {
        (StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
    } else {
        (StatusCode::OK, "Hello, World!")
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(response)
}

fn read_pem(path: &str) -> Result<Vec<rustls_pemfile::Item>, String> {
    let file = File::open(path).map_err(|error| format!("cannot open {path}: {error}"))?;
    rustls_pemfile::read_all(&mut BufReader::new(file))
        .map_err(|error| format!("cannot read {path}: {error}"))
}

fn tls_config(cert_path: &str, key_path: &str) -> Result<ServerConfig, String> {
    use rustls_pemfile::Item;
    let chain: Vec<Certificate> = read_pem(cert_path)?
        .into_iter()
        .filter_map(|item| match item {
            Item::X509Certificate(der) => Some(Certificate(der)),
            _ => None,
        })
        .collect();
    if chain.is_empty() {
        return Err(format!("no certificate in {cert_path}"));
    }
    let key = read_pem(key_path)?
        .into_iter()
        .find_map(|item| match item {
            Item::PKCS8Key(der) | Item::RSAKey(der) | Item::ECKey(der) => Some(PrivateKey(der)),
            _ => None,
        })
        .ok_or_else(|| format!("no private key in {key_path}"))?;
    let mut config = ServerConfig::builder()
        .with_safe_defaults()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|error| format!("certificate or key rejected: {error}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn usage(message: &str) -> ExitCode {
    eprintln!("canopy_rust_peers: {message}\n{USAGE}");
    ExitCode::from(2)
}

pub fn run(arguments: &[String]) -> ExitCode {
    let mut tls = false;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (mut cert, mut key) = (None, None);
    let mut index = 0;
    while index < arguments.len() {
        let value = arguments.get(index + 1).map(String::as_str);
        match (arguments[index].as_str(), value) {
            ("--mode", Some("http")) => tls = false,
            ("--mode", Some("tls")) => tls = true,
            ("--cert", Some(path)) => cert = Some(path.to_string()),
            ("--key", Some(path)) => key = Some(path.to_string()),
            ("--threads", Some(text)) => match text.parse::<usize>() {
                Ok(count) if count > 0 => threads = count,
                _ => return usage("--threads takes a positive number"),
            },
            _ => return usage("unknown argument"),
        }
        index += 2;
    }
    let acceptor = match (tls, cert, key) {
        (false, None, None) => None,
        (true, Some(cert), Some(key)) => match tls_config(&cert, &key) {
            Ok(config) => Some(TlsAcceptor::from(Arc::new(config))),
            Err(message) => {
                eprintln!("canopy_rust_peers: {message}");
                return ExitCode::from(1);
            }
        },
        (true, _, _) => return usage("--mode tls needs --cert and --key"),
        (false, _, _) => return usage("--cert and --key are for --mode tls"),
    };
    let runtime = match Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("canopy_rust_peers: tokio runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let mut http = Http::new();
    http.http1_only(true)
        .http1_keep_alive(true)
        .pipeline_flush(true);
    let http = Arc::new(http);
    runtime.block_on(async move {
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(listener) => listener,
            Err(error) => {
                eprintln!("canopy_rust_peers: cannot listen on 127.0.0.1: {error}");
                return ExitCode::from(1);
            }
        };
        let port = listener.local_addr().map_or(0, |address| address.port());
        println!("listening on 127.0.0.1:{port}");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let http = Arc::clone(&http);
            // The handshake runs in the connection's task, so a slow client
            // never holds up the accept loop. A connection's errors (a
            // reset, a malformed request, a failed handshake) end that
            // connection only.
            match &acceptor {
                None => {
                    tokio::spawn(async move {
                        let _ = http.serve_connection(stream, service_fn(answer)).await;
                    });
                }
                Some(acceptor) => {
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        if let Ok(stream) = acceptor.accept(stream).await {
                            let _ = http.serve_connection(stream, service_fn(answer)).await;
                        }
                    });
                }
            }
        }
    })
}
