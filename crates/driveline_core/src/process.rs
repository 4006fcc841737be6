//! What this process uses: its CPU time and resident memory, as Linux reports them in
//! `/proc/self` (nothing elsewhere). For the benchmarks and tools (`driveline bench`,
//! `driveline soak`, `fleet_threads`); no simulation reads it.

/// The CPU time this process has used, user and system over all its threads, s (fields 14
/// and 15 of `/proc/self/stat`, in the kernel's fixed 100 ticks a second; `None` where there
/// is no such file).
pub fn cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// Resident memory of this process, bytes (`VmRSS` of `/proc/self/status`; 0 where there is
/// none).
pub fn rss_bytes() -> u64 {
    status_bytes("VmRSS:")
}

/// The peak resident memory of this process so far, bytes (`VmHWM` of `/proc/self/status`; 0
/// where there is none).
pub fn peak_rss_bytes() -> u64 {
    status_bytes("VmHWM:")
}

/// A `kB` field of `/proc/self/status`, in bytes (0 where there is none).
fn status_bytes(field: &str) -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/status") else { return 0 };
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    /// Where Linux reports them, the CPU time grows with work and the peak is at least the
    /// resident memory, which is more than nothing.
    #[test]
    fn the_process_reports_its_cpu_time_and_memory() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        let before = super::cpu_seconds().expect("a CPU time");
        // Some 50 ms of work (the clock's tick is 10 ms).
        let start = std::time::Instant::now();
        let mut x = 1.0_f64;
        while start.elapsed().as_millis() < 50 {
            x = std::hint::black_box(x * 1.000_000_1 + 1e-9);
        }
        let after = super::cpu_seconds().expect("a CPU time");
        assert!(after >= before && after > 0.0, "{before} -> {after}");
        let (rss, peak) = (super::rss_bytes(), super::peak_rss_bytes());
        assert!(rss > 0 && peak >= rss, "rss {rss}, peak {peak}");
    }
}
