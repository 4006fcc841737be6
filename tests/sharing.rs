//! Vehicles of one file share what is the same between them (the compiled modes, the
//! description, the layout), without a bit of difference in any result. A test binary of its
//! own: the allocation tests of `invariants.rs` count on few vehicles of a file alive at once.

/// The 8HP sedan from rest: a launch whose throttle and braking times move with `phase`, the
/// bits of every speed after every step hashed (FNV-1a), one step at a time.
struct PhasedDrive {
    phase: f64,
    vehicle: driveline::core::Vehicle,
    hash: u64,
}

/// Steps of a [`PhasedDrive`].
const DRIVE_STEPS: usize = 6000;

impl PhasedDrive {
    fn new(phase: f64) -> Self {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
        let vehicle = driveline::core::Vehicle::load(&path).unwrap_or_else(|e| panic!("{e}"));
        PhasedDrive { phase, vehicle, hash: 0xcbf2_9ce4_8422_2325 }
    }

    /// Step `k` of the drive.
    fn step(&mut self, k: usize) {
        use driveline::core::DriverInput;
        use driveline::core::automatic::Selector;
        let t = k as f64 * 1e-3;
        let on = (0.5 + self.phase..4.0 + self.phase).contains(&t);
        let input = DriverInput {
            selector: Selector::Drive,
            throttle: if on { 0.6 + 0.1 * self.phase } else { 0.0 },
            brake: if on { 0.0 } else { 0.5 },
            ..Default::default()
        };
        self.vehicle.step(&input, 1e-3).unwrap();
        for s in self.vehicle.simulation().speeds() {
            for byte in s.to_bits().to_le_bytes() {
                self.hash ^= byte as u64;
                self.hash = self.hash.wrapping_mul(0x100_0000_01b3);
            }
        }
    }
}

/// The whole drive of `phase` (see [`PhasedDrive`]): the vehicle and the hash of its speeds.
fn phased_drive(phase: f64) -> (driveline::core::Vehicle, u64) {
    let mut d = PhasedDrive::new(phase);
    for k in 0..DRIVE_STEPS {
        d.step(k);
    }
    (d.vehicle, d.hash)
}

#[test]
fn vehicles_stepped_in_turn_on_one_thread_each_drive_as_alone() {
    // A thread lends one scratch set per network shape to every simulation it steps: each
    // step here borrows the set the other drives' steps used last. Their results are the
    // same, bit for bit, as each drive's alone (a step reads no scratch buffer before writing
    // it; the complementarity factors and stage forces another simulation left are not used).
    let phases = [0.0, 0.7, 1.3, 2.1];
    let alone: Vec<u64> = phases.iter().map(|&p| phased_drive(p).1).collect();
    let mut drives: Vec<PhasedDrive> = phases.iter().map(|&p| PhasedDrive::new(p)).collect();
    // (A snapshot's clone steps beside its original, from the same state. Each step is
    // preceded by the next drive's `Vehicle::prefetch`, as a fleet's loop does: a hint, which
    // changes no bit.)
    for k in 0..DRIVE_STEPS {
        for i in 0..drives.len() {
            if let Some(next) = drives.get(i + 1) {
                next.vehicle.prefetch();
            }
            drives[i].step(k);
        }
        if k == 2500 {
            let copy = PhasedDrive { phase: drives[1].phase, vehicle: drives[1].vehicle.clone(), hash: drives[1].hash };
            drives.push(copy);
        }
    }
    for (p, (a, d)) in phases.iter().zip(alone.iter().zip(&drives)) {
        assert_eq!(*a, d.hash, "the drive of phase {p} differs when stepped in turn with the others");
    }
    assert_eq!(drives[4].hash, alone[1], "a clone stepped in turn with its original drives as the original");
    assert!(alone.windows(2).all(|w| w[0] != w[1]), "distinct drives differ");
}

#[test]
fn vehicles_of_one_file_share_their_compiled_modes_bit_for_bit() {
    // Each drive alone, one after the other; then all at once on two threads, interleaved, one
    // compiling what another finds compiled. Every drive's speeds are the same, bit for bit.
    let phases = [0.0, 0.7, 1.3, 2.1];
    let alone: Vec<u64> = phases.iter().map(|&p| phased_drive(p).1).collect();
    let together: Vec<(driveline::core::Vehicle, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = phases.iter().map(|&p| s.spawn(move || phased_drive(p))).collect();
        handles.into_iter().map(|h| h.join().expect("a drive panicked")).collect()
    });
    for ((p, a), (_, b)) in phases.iter().zip(&alone).zip(&together) {
        assert_eq!(a, b, "the drive of phase {p} differs when run beside the others");
    }
    let (first, rest) = together.split_first().unwrap();
    for (v, _) in rest {
        assert!(first.0.simulation().shares_compiled_modes_with(v.simulation()), "one library for one file");
        assert!(std::ptr::eq(first.0.spec(), v.spec()), "one description for one file");
        assert!(std::ptr::eq(first.0.layout(), v.layout()), "one layout for one file");
    }
    // Distinct drives did differ (the hashes would not tell a shared mistake otherwise).
    assert!(alone.windows(2).all(|w| w[0] != w[1]));
    // A vehicle of another file has a library of its own.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/nissan_350z.ron");
    let other = driveline::core::Vehicle::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(!first.0.simulation().shares_compiled_modes_with(other.simulation()));
    assert!(!std::ptr::eq(first.0.layout(), other.layout()));
}
