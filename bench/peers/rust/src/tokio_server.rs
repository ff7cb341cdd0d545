//! `canopy_rust_peers tokio_server [--mode http|echo] [--threads T]`: the
//! tokio peer of the servers that bench/io/defaults_bench.py drives.
//!
//! A multi-thread runtime of T workers (default: one per hardware thread,
//! as `#[tokio::main]`), a listener on 127.0.0.1 at a port the kernel picks
//! (printed as "listening on 127.0.0.1:PORT", the line the Canopy examples
//! print) and one task per connection:
//!   http  reads requests (a head ending in an empty line, no body: the load
//!         generators send GETs), answers each complete one in the buffer
//!         with examples/http_hello's response, byte for byte, and writes
//!         the answers of one read in one write (pipelining as the example
//!         does); a head over 8 KiB closes the connection;
//!   echo  writes back what it reads, as examples/echo_server does.
//! TCP_NODELAY on every connection, as Canopy sets it. Runs until a signal
//! ends the process (the bench sends SIGTERM).

use std::process::ExitCode;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Builder;

const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, World!";
const HEAD_LIMIT: usize = 8192;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Http,
    Echo,
}

fn end_of_head(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at + 4)
}

async fn serve_http(mut stream: TcpStream) {
    let mut input: Vec<u8> = Vec::with_capacity(HEAD_LIMIT);
    let mut output: Vec<u8> = Vec::with_capacity(RESPONSE.len() * 4);
    let mut chunk = [0u8; 4096];
    loop {
        let got = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(got) => got,
        };
        input.extend_from_slice(&chunk[..got]);
        let mut consumed = 0;
        while let Some(end) = end_of_head(&input[consumed..]) {
            output.extend_from_slice(RESPONSE);
            consumed += end;
        }
        input.drain(..consumed);
        if input.len() > HEAD_LIMIT {
            return;
        }
        if !output.is_empty() {
            if stream.write_all(&output).await.is_err() {
                return;
            }
            output.clear();
        }
    }
}

async fn serve_echo(mut stream: TcpStream) {
    let mut buffer = [0u8; 4096];
    loop {
        let got = match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(got) => got,
        };
        if stream.write_all(&buffer[..got]).await.is_err() {
            return;
        }
    }
}

fn usage(message: &str) -> ExitCode {
    eprintln!(
        "canopy_rust_peers: {message}\nusage: tokio_server [--mode http|echo] [--threads T]"
    );
    ExitCode::from(2)
}

pub fn run(arguments: &[String]) -> ExitCode {
    let mut mode = Mode::Http;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut index = 0;
    while index < arguments.len() {
        let value = arguments.get(index + 1).map(String::as_str);
        match (arguments[index].as_str(), value) {
            ("--mode", Some("http")) => mode = Mode::Http,
            ("--mode", Some("echo")) => mode = Mode::Echo,
            ("--threads", Some(text)) => match text.parse::<usize>() {
                Ok(count) if count > 0 => threads = count,
                _ => return usage("--threads takes a positive number"),
            },
            _ => return usage("unknown argument"),
        }
        index += 2;
    }
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
            if mode == Mode::Http {
                tokio::spawn(serve_http(stream));
            } else {
                tokio::spawn(serve_echo(stream));
            }
        }
    })
}
