//! Whether this machine's wall clock can be trusted today: how fast one thread runs alone, how
//! fast two run side by side, and how long a load takes from each level of the memory.
//!
//! `cargo run --release -p driveline_tools --bin machine_check`
//!
//! The development machines are 2-core VMs that share their hosts. On some days the two cores
//! run side by side at full speed; on others each slows the other by a third or more (they are
//! two threads of one host core, or the host is busy), and the memory past the L2 is several
//! times slower than the days before (docs/performance.md). A fleet's throughput, the plugin's
//! overhead over the core and anything a worker thread does while waiting all move with that,
//! and not with the code. Run this first; compare wall-clock figures only between runs whose
//! checks agree.
//!
//! It prints:
//! - **alone**: the time of one step of a dependent chain of integer operations (a shift, an
//!   exclusive or and a multiply: a fixed number of cycles a step on a given core, so it follows
//!   the core's clock);
//! - **side by side**: the same on two threads at once, each thread's time, and their ratio to
//!   alone (1.0: the cores are independent);
//! - **beside a waiting thread**: the chain beside a thread that polls a value with the
//!   processor's spin hint, as a worker waiting for work does, and its ratio to alone;
//! - **load latency**: a chain of dependent loads through a shuffled ring of 16 KiB to 64 MiB,
//!   ns a load (the L1, the L2, the last level, the memory);
//! - **verdict**: the cores share when side by side is more than `SIDE_BY_SIDE_SHARED` of
//!   alone or beside a waiting thread more than `BESIDE_WAITING_SHARED` (independent cores
//!   measure 1.00 to 1.02 on both; sharing ones 1.2 to 1.6).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Side by side over alone above which the verdict says the cores share: past the 1.00 to 1.02
/// of independent cores by more than a run's noise.
const SIDE_BY_SIDE_SHARED: f64 = 1.15;

/// Beside a waiting thread over alone above which the verdict says the cores share (a spinning
/// neighbour slows a sharing core less than a working one does).
const BESIDE_WAITING_SHARED: f64 = 1.1;

/// Steps of the dependent chain a measurement takes.
const CHAIN: u64 = 200_000_000;

/// The time of one step of a chain of dependent integer operations, ns.
fn chain() -> f64 {
    let start = Instant::now();
    let mut x = black_box(1u64);
    for _ in 0..CHAIN {
        // (A shift, an exclusive or and a multiply, each waiting on the last: no closed form
        // for the compiler to find, no two steps at once for the processor.)
        x = (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    }
    black_box(x);
    start.elapsed().as_secs_f64() * 1e9 / CHAIN as f64
}

/// The chain on two threads at once: each thread's time a step, ns.
fn side_by_side() -> [f64; 2] {
    std::thread::scope(|s| {
        let a = s.spawn(chain);
        let b = chain();
        [a.join().unwrap_or(f64::NAN), b]
    })
}

/// The chain beside a thread that spins on a flag with the spin hint, ns a step.
fn beside_waiting() -> f64 {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let t = chain();
        stop.store(true, Ordering::Relaxed);
        t
    })
}

/// The time of a load through a shuffled ring of `bytes`, one 64-byte line a load, ns.
fn load_latency(bytes: usize) -> f64 {
    let n = (bytes / 64).max(2);
    // A single cycle through every line in a random order (Sattolo's shuffle, a fixed seed).
    let mut order: Vec<usize> = (0..n).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..n).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let j = (seed % i as u64) as usize;
        order.swap(i, j);
    }
    let mut ring = vec![0usize; n * 8];
    for k in 0..n {
        ring[order[k] * 8] = order[(k + 1) % n] * 8;
    }
    let mut at = 0;
    for _ in 0..n {
        at = ring[at];
    }
    let loads = 20_000_000;
    let start = Instant::now();
    for _ in 0..loads {
        at = ring[at];
    }
    black_box(at);
    start.elapsed().as_secs_f64() * 1e9 / loads as f64
}

fn main() {
    let alone = chain();
    println!("alone: {alone:.3} ns a step");
    let [a, b] = side_by_side();
    let ratio = 0.5 * (a + b) / alone;
    println!("side by side: {a:.3} and {b:.3} ns a step, {ratio:.2} of alone");
    let waiting = beside_waiting();
    println!("beside a waiting thread: {waiting:.3} ns a step, {:.2} of alone", waiting / alone);
    let lat: Vec<String> = [16usize << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
        .iter()
        .map(|&bytes| format!("{} KiB {:.1}", bytes >> 10, load_latency(bytes)))
        .collect();
    println!("load latency, ns: {}", lat.join(", "));
    let shared = ratio > SIDE_BY_SIDE_SHARED || waiting / alone > BESIDE_WAITING_SHARED;
    println!(
        "verdict: {}",
        if shared {
            "the two cores slow each other: wall-clock figures of threads are not comparable with an independent-core day"
        } else {
            "the two cores run side by side at full speed"
        }
    );
}
