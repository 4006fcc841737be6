//! A crew of worker threads for a fleet's passes: [`Crew`].
//!
//! A fleet steps its vehicles in passes, one a tick, each pass split into one run per thread.
//! How the runs are handed out costs time at every tick: on the 2-core VMs this project is
//! measured on, a thread woken through the operating system starts its run 25 to 100 us after
//! the pass starts, and the thread that wakes it pays some 25 us for the call
//! (docs/performance.md). A crew keeps that to one wake-up a pass: the calling thread runs the
//! first run itself, at once, wakes the workers only when one sleeps, and watches for the
//! workers' ends instead of sleeping until they tell it. Two barriers a step (each thread
//! asleep at each) cost more: 30 sedans on two independent cores took 4.21 to 4.54 us per
//! vehicle-step with them, 2.82 to 3.44 with a crew (docs/performance.md, "One wake-up a pass").
//!
//! A worker may also watch for the next pass for a while ([`Crew::set_spin`]) before it
//! sleeps: a pass that follows within that time starts on every thread at once. That pays
//! only where the cores are independent and the passes follow closely, and costs where the
//! two cores of a VM slow each other (a waiting thread then takes a quarter to a half of the
//! working one's speed): the default is to sleep at once.
//!
//! Which thread runs a run changes nothing but the time: results stay the same to the bit.
//!
//! ```
//! use driveline_core::crew::Crew;
//! use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
//! let mut crew = Crew::new(1);
//! let sums = [AtomicU64::new(0), AtomicU64::new(0)];
//! // Run 0 on the calling thread, run 1 on the crew's worker.
//! crew.run(&|k| sums[k].store((k as u64 + 1) * 10, Relaxed));
//! assert_eq!([sums[0].load(Relaxed), sums[1].load(Relaxed)], [10, 20]);
//! ```

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A pass's job: called with the run's number (0 on the calling thread, `1..=workers` on the
/// workers).
type Job<'a> = &'a (dyn Fn(usize) + Sync);

/// What the caller and the workers share.
struct Shared {
    /// The passes started so far; a worker runs a pass when it sees this move.
    epoch: AtomicU64,
    /// The job of the pass in progress: a pointer to the caller's [`Job`], valid until every
    /// worker has counted itself out of `pending` (the caller waits for that before returning).
    job: AtomicPtr<()>,
    /// The workers that have not yet finished the pass in progress.
    pending: AtomicUsize,
    /// Whether a worker's run panicked in the pass in progress.
    panicked: AtomicBool,
    /// The crew is being dropped: the workers end.
    exit: AtomicBool,
    /// The workers asleep (or about to be): the caller wakes them only when there are any.
    sleeping: AtomicUsize,
    /// What a sleeping worker waits on.
    bed: Mutex<()>,
    /// See `bed`.
    wake: Condvar,
    /// How long a worker watches for the next pass before it sleeps, ns.
    spin: AtomicU64,
}

/// Worker threads that run the runs of a pass beside the calling thread (see the module docs).
/// Dropping the crew ends and joins its threads.
pub struct Crew {
    shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Crew {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crew").field("workers", &self.threads.len()).field("spin", &self.spin()).finish()
    }
}

impl Crew {
    /// A crew of `workers` threads, each asleep between passes (see [`Crew::set_spin`]). A
    /// thread the system cannot start is left out: [`Crew::workers`] says how many started.
    pub fn new(workers: usize) -> Self {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            pending: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            exit: AtomicBool::new(false),
            sleeping: AtomicUsize::new(0),
            bed: Mutex::new(()),
            wake: Condvar::new(),
            spin: AtomicU64::new(0),
        });
        let threads = (1..=workers)
            .map_while(|k| {
                let shared = shared.clone();
                std::thread::Builder::new().name(format!("driveline-crew-{k}")).spawn(move || work(&shared, k)).ok()
            })
            .collect();
        Self { shared, threads }
    }

    /// The worker threads (the runs of a pass are one more: the calling thread's).
    pub fn workers(&self) -> usize {
        self.threads.len()
    }

    /// How long a worker watches for the next pass before it sleeps (zero by default).
    pub fn spin(&self) -> Duration {
        Duration::from_nanos(self.shared.spin.load(Ordering::Relaxed))
    }

    /// Sets how long a worker watches for the next pass after its run before it sleeps (zero:
    /// it sleeps at once, and the next pass wakes it). Watching keeps a core busy for that
    /// long after each pass; it pays only on independent cores (see the module docs).
    pub fn set_spin(&mut self, spin: Duration) {
        let ns = spin.as_nanos().min(u128::from(u64::MAX)) as u64;
        self.shared.spin.store(ns, Ordering::Relaxed);
    }

    /// Runs one pass: `job(0)` on the calling thread and `job(k)` for `k` in `1..=workers` on
    /// the workers, and returns when every run has returned. A run that panics makes the pass
    /// panic on the calling thread once every run has ended. (`&mut`: one pass at a time.)
    pub fn run(&mut self, job: Job<'_>) {
        let shared = &*self.shared;
        let workers = self.threads.len();
        shared.panicked.store(false, Ordering::Relaxed);
        if workers > 0 {
            // The job lives on this frame until `Pass::drop` has seen every worker out.
            let at: *const Job<'_> = &job;
            shared.job.store(at as *mut (), Ordering::Relaxed);
            shared.pending.store(workers, Ordering::Relaxed);
            // (SeqCst: ordered against the workers' count of sleepers; see `sleep`.)
            shared.epoch.fetch_add(1, Ordering::SeqCst);
            if shared.sleeping.load(Ordering::SeqCst) > 0 {
                let _bed = shared.bed.lock().unwrap_or_else(|e| e.into_inner());
                shared.wake.notify_all();
            }
        }
        // Waits for the workers even if this thread's own run unwinds.
        let pass = Pass(shared);
        job(0);
        drop(pass);
        if shared.panicked.swap(false, Ordering::Relaxed) {
            panic!("a run of a crew's pass panicked");
        }
    }
}

impl Crew {
    /// The crew in `slot` if it has `workers` workers, else a new one put there (asleep between
    /// passes). A crew whose thread failed to start is asked for again at the next call; the
    /// runs it lacks go on the calling thread meanwhile ([`Crew::run_each`]).
    pub fn fitted(slot: &mut Option<Crew>, workers: usize) -> &mut Crew {
        if slot.as_ref().is_some_and(|c| c.workers() == workers) {
            return slot.as_mut().expect("just seen");
        }
        slot.insert(Crew::new(workers))
    }

    /// Runs `job(j)` once for each `j` in `0..runs`: run `j` on worker `j` where the crew has
    /// one (`1..=workers`), run 0 and the runs past the workers (a thread the system did not
    /// start) on the calling thread, in order. Returns when every run has returned; a panic as
    /// [`Crew::run`].
    pub fn run_each(&mut self, runs: usize, job: Job<'_>) {
        let workers = self.threads.len();
        if runs == 0 {
            return;
        }
        self.run(&|k| {
            if k == 0 {
                job(0);
                (workers + 1..runs).for_each(job);
            } else if k < runs {
                job(k);
            }
        });
    }
}

/// The calling thread's side of a pass in progress: dropping it waits for the workers.
struct Pass<'a>(&'a Shared);

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        let mut polls = 0u32;
        while self.0.pending.load(Ordering::Acquire) != 0 {
            polls = polls.wrapping_add(1);
            // (A worker the system took off its core: let it back on rather than spin
            // against it.)
            if polls.is_multiple_of(1 << 14) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        let shared = &*self.shared;
        shared.exit.store(true, Ordering::SeqCst);
        shared.epoch.fetch_add(1, Ordering::SeqCst);
        {
            let _bed = shared.bed.lock().unwrap_or_else(|e| e.into_inner());
            shared.wake.notify_all();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Worker `k`'s loop: wait for a pass, run its run, count itself out.
fn work(shared: &Shared, k: usize) {
    // (Not the epoch as this thread finds it: a pass may have started before it did.)
    let mut seen = 0;
    loop {
        seen = next_pass(shared, seen);
        if shared.exit.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: the caller stored a pointer to its job before moving the epoch this worker
        // saw (the Acquire above pairs with its SeqCst increment), and keeps the job alive
        // until this worker has counted itself out of `pending` below.
        let job = unsafe { *(shared.job.load(Ordering::Relaxed) as *const Job<'_>) };
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(k))).is_err() {
            shared.panicked.store(true, Ordering::Relaxed);
        }
        shared.pending.fetch_sub(1, Ordering::Release);
    }
}

/// Waits until the epoch moves past `seen` (watching it for the crew's spin time, then asleep)
/// and returns the new epoch.
fn next_pass(shared: &Shared, seen: u64) -> u64 {
    let since = Instant::now();
    let mut polls = 0u32;
    loop {
        let now = shared.epoch.load(Ordering::Acquire);
        if now != seen {
            return now;
        }
        polls = polls.wrapping_add(1);
        // (The clock read every 256 polls: a few per microsecond.)
        if polls.is_multiple_of(256) && since.elapsed().as_nanos() >= u128::from(shared.spin.load(Ordering::Relaxed)) {
            return sleep(shared, seen);
        }
        std::hint::spin_loop();
    }
}

/// Sleeps until the epoch moves past `seen`, and returns the new epoch.
fn sleep(shared: &Shared, seen: u64) -> u64 {
    // The count goes up before the epoch is read again (SeqCst both, as the caller's increment
    // of the epoch and its read of the count): a caller that moves the epoch either sees this
    // sleeper and wakes it under the lock, or moved the epoch before the read below sees it.
    shared.sleeping.fetch_add(1, Ordering::SeqCst);
    let mut bed = shared.bed.lock().unwrap_or_else(|e| e.into_inner());
    let now = loop {
        let now = shared.epoch.load(Ordering::SeqCst);
        if now != seen {
            break now;
        }
        bed = shared.wake.wait(bed).unwrap_or_else(|e| e.into_inner());
    };
    drop(bed);
    shared.sleeping.fetch_sub(1, Ordering::SeqCst);
    now
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// Every run of every pass runs once, on its own number, whether the workers watch or sleep
    /// between passes.
    #[test]
    fn each_pass_runs_each_run_once() {
        for spin in [Duration::ZERO, Duration::from_micros(50), Duration::from_secs(1)] {
            let mut crew = Crew::new(3);
            crew.set_spin(spin);
            assert_eq!(crew.workers(), 3);
            let counts: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
            for pass in 0..500u64 {
                crew.run(&|k| {
                    counts[k].fetch_add(pass + 1, Ordering::Relaxed);
                });
                if pass % 100 == 0 {
                    // (A gap longer than the short spin: the workers fall asleep.)
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            let want = 500 * 501 / 2;
            assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == want), "spin {spin:?}");
        }
    }

    /// A pass returns only when every run has: what the runs wrote is there when it returns.
    #[test]
    fn a_pass_returns_after_its_slowest_run() {
        let mut crew = Crew::new(1);
        let done = AtomicBool::new(false);
        crew.run(&|k| {
            if k == 1 {
                std::thread::sleep(Duration::from_millis(20));
                done.store(true, Ordering::Relaxed);
            }
        });
        assert!(done.load(Ordering::Relaxed));
    }

    /// A worker's panic reaches the caller as a panic of the pass, after every run ended; the
    /// crew still runs the passes after it.
    #[test]
    fn a_workers_panic_is_the_passs() {
        let mut crew = Crew::new(2);
        crew.set_spin(Duration::from_micros(100));
        let ran = AtomicU64::new(0);
        let pass = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crew.run(&|k| {
                ran.fetch_add(1, Ordering::Relaxed);
                assert!(k != 2, "run 2 fails");
            })
        }));
        assert!(pass.is_err());
        assert_eq!(ran.load(Ordering::Relaxed), 3);
        crew.run(&|_| {
            ran.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(ran.load(Ordering::Relaxed), 6);
    }

    /// `run_each` runs each run once, whether the crew has fewer workers than runs (the rest on
    /// the calling thread) or more (the extra workers idle).
    #[test]
    fn run_each_runs_each_run_once() {
        for (workers, runs) in [(0, 3), (1, 4), (3, 4), (3, 2), (2, 0)] {
            let mut crew = Crew::new(workers);
            let counts: Vec<AtomicU64> = (0..runs).map(|_| AtomicU64::new(0)).collect();
            for _ in 0..50 {
                crew.run_each(runs, &|j| {
                    counts[j].fetch_add(1, Ordering::Relaxed);
                });
            }
            assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 50), "{workers} workers, {runs} runs");
        }
    }

    /// A crew without workers runs the pass on the calling thread.
    #[test]
    fn no_workers_is_the_calling_thread() {
        let mut crew = Crew::new(0);
        let ran = AtomicU64::new(0);
        crew.run(&|k| {
            ran.fetch_add(k as u64 + 1, Ordering::Relaxed);
        });
        assert_eq!(ran.load(Ordering::Relaxed), 1);
    }
}
