//! The command line of canopy_bench (bench/command_line.cpp), with the
//! peers this binary runs.

use crate::catalog::{find_workload, WorkloadDescriptor, WORKLOAD_CATALOG};

pub const PEERS: &[&str] = &["rayon", "tokio"];

pub struct CommandLine {
    pub workload: Option<&'static WorkloadDescriptor>,
    pub peer: &'static str,
    pub threads: usize,
    pub reps: u32,
    pub list_workloads: bool,
}

fn parse_positive(text: &str) -> Option<u32> {
    match text.parse::<u32>() {
        Ok(number) if number > 0 && text.bytes().all(|byte| byte.is_ascii_digit()) => Some(number),
        _ => None,
    }
}

pub fn parse_command_line(arguments: &[String]) -> Result<CommandLine, String> {
    let mut parsed = CommandLine {
        workload: None,
        peer: PEERS[0],
        threads: std::thread::available_parallelism().map_or(1, usize::from),
        reps: 5,
        list_workloads: false,
    };
    let mut remaining = arguments.iter();
    while let Some(argument) = remaining.next() {
        match argument.as_str() {
            "--list" => parsed.list_workloads = true,
            "--peer" | "--threads" | "--reps" => {
                let value = remaining
                    .next()
                    .ok_or_else(|| format!("{argument} needs a value"))?;
                if argument == "--peer" {
                    parsed.peer = PEERS
                        .iter()
                        .find(|peer| **peer == value)
                        .ok_or_else(|| format!("unknown peer '{value}'"))?;
                } else {
                    let number = parse_positive(value).ok_or_else(|| {
                        format!("{argument} needs a positive integer, got '{value}'")
                    })?;
                    if argument == "--threads" {
                        parsed.threads = number as usize;
                    } else {
                        parsed.reps = number;
                    }
                }
            }
            option if option.starts_with('-') => return Err(format!("unknown option '{option}'")),
            name => {
                if parsed.workload.is_some() {
                    return Err("more than one workload given".to_string());
                }
                parsed.workload =
                    Some(find_workload(name).ok_or_else(|| format!("unknown workload '{name}'"))?);
            }
        }
    }
    if parsed.workload.is_none() && !parsed.list_workloads {
        return Err("no workload given".to_string());
    }
    Ok(parsed)
}

pub fn usage_text() -> String {
    let mut text = String::from(
        "usage: canopy_rust_peers WORKLOAD [--peer rayon|tokio] [--threads N] [--reps R]\n\
         \x20      canopy_rust_peers --list\n\
         \x20 --peer     executor to run on (default rayon)\n\
         \x20 --threads  worker threads (default: hardware concurrency)\n\
         \x20 --reps     measured repetitions after one warm-up (default 5)\n\
         \x20 --list     print the workload names, one a line\n\
         workloads:",
    );
    for workload in WORKLOAD_CATALOG {
        text.push(' ');
        text.push_str(workload.name);
    }
    text + "\n"
}
