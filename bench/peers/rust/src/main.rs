//! canopy_rust_peers: runs one canopy_bench workload on rayon or tokio and
//! prints the median of the measured repetitions as one JSON line, exactly
//! as canopy_bench does for Canopy, oneTBB and Asio (bench/main.cpp): same
//! command line, same parameters, same line. bench/run_bench.py runs it for
//! the peers "rayon" and "tokio".
//!
//! Exit status: 0 on success, 1 when a workload computed a wrong result
//! (message on stderr), 2 for a usage error or a workload this peer has no
//! implementation of.

mod catalog;
mod command_line;
mod harness;
mod hyper_server;
mod parameters;
mod probes;
mod rayon_peer;
mod timer_storm;
mod tokio_peer;
mod tokio_server;
mod tokio_toolkit;

use std::process::ExitCode;

use catalog::{WorkloadDescriptor, WORKLOAD_CATALOG};
use command_line::{parse_command_line, usage_text, CommandLine};
use harness::json_line::{to_json_line, ResultRecord};
use harness::statistics::summarize;
use harness::workload::{ResultMismatch, WorkloadInstance};

const EXIT_RUN_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;

fn measured_reps(workload: &WorkloadDescriptor, requested: u32) -> u32 {
    if workload.max_reps == 0 {
        requested
    } else {
        requested.min(workload.max_reps)
    }
}

fn measure(
    options: &CommandLine,
    workload: &'static WorkloadDescriptor,
    instance: &mut dyn WorkloadInstance,
) -> Result<ResultRecord, ResultMismatch> {
    let reps = measured_reps(workload, options.reps);
    if workload.warm_up {
        instance.run_once()?; // checked, not measured
    }
    let mut values = Vec::new();
    let mut p99s = Vec::new();
    let mut other_threads = Vec::new();
    for _ in 0..reps {
        let result = instance.run_once()?;
        values.push(result.value);
        p99s.extend(result.p99);
        other_threads.extend(result.other_threads);
    }
    let spread = summarize(&values);
    Ok(ResultRecord {
        peer: options.peer,
        workload: workload.name,
        value: spread.median,
        unit: workload.unit,
        threads: options.threads,
        reps,
        min: spread.min,
        max: spread.max,
        p99: (!p99s.is_empty()).then(|| summarize(&p99s).median),
        // The mean, as canopy_bench takes it: most idle seconds read 0.
        other_threads: (!other_threads.is_empty())
            .then(|| other_threads.iter().sum::<f64>() / other_threads.len() as f64),
    })
}

fn run(arguments: &[String]) -> u8 {
    let options = match parse_command_line(arguments) {
        Ok(options) => options,
        Err(error) => {
            eprint!("canopy_rust_peers: {error}\n{}", usage_text());
            return EXIT_USAGE;
        }
    };
    if options.list_workloads {
        for workload in WORKLOAD_CATALOG {
            println!("{}", workload.name);
        }
        return 0;
    }
    let workload = options
        .workload
        .expect("parse_command_line requires a workload");
    let instance = match options.peer {
        "rayon" => rayon_peer::make_instance(workload.name, options.threads),
        _ => tokio_peer::make_instance(workload.name, options.threads),
    };
    let mut instance = match instance {
        Some(instance) => instance,
        None => {
            eprintln!(
                "canopy_rust_peers: no {} implementation of {} in this binary",
                options.peer, workload.name
            );
            return EXIT_USAGE;
        }
    };
    match measure(&options, workload, instance.as_mut()) {
        Ok(record) => {
            println!("{}", to_json_line(&record));
            0
        }
        Err(ResultMismatch(message)) => {
            eprintln!(
                "canopy_rust_peers: {} on {} gave a wrong result: {message}",
                workload.name, options.peer
            );
            EXIT_RUN_FAILED
        }
    }
}

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    // The I/O bench's timer storm (bench/io_bench.py): its own options and line.
    if arguments.first().map(String::as_str) == Some("timer_storm") {
        return ExitCode::from(timer_storm::run(&arguments[1..]));
    }
    // The shipped-defaults server bench's tokio servers (bench/io/defaults_bench.py).
    if arguments.first().map(String::as_str) == Some("tokio_server") {
        return tokio_server::run(&arguments[1..]);
    }
    // ... and its hyper server, the fair peer of examples/http_hello.
    if arguments.first().map(String::as_str) == Some("hyper_server") {
        return hyper_server::run(&arguments[1..]);
    }
    ExitCode::from(run(&arguments))
}
