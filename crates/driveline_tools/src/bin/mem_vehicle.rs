//! Where a vehicle's memory goes: heap bytes of each piece of one vehicle, measured with a
//! counting global allocator (every allocation and free of the process goes through it), and
//! how the piece grows over a drive cycle. `cargo run --release -p driveline_tools --bin
//! mem_vehicle -- [vehicle file] [seconds of UDDS] [vehicles]` (defaults: the 8HP sedan, 600 s,
//! 20 vehicles in the plugin after 20 others).

use driveline_core::vehicle::driver::{Cycle, Driver, DriverParams};
use driveline_core::vehicle::{Road, VehicleControl, build};
use driveline_core::{IntegrationParameters, Network, Simulation, Vehicle};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The system allocator, counting the bytes in use and their peak.
struct Counting;
static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = IN_USE.fetch_add(l.size(), Relaxed) + l.size();
        PEAK.fetch_max(now, Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        IN_USE.fetch_sub(l.size(), Relaxed);
        // SAFETY: the pointer came from `alloc` with this layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn in_use() -> usize {
    IN_USE.load(Relaxed)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let file = args.next().unwrap_or_else(|| "assets/vehicles/sedan_8hp.ron".into());
    let seconds: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(600.0);
    let udds = std::fs::read_to_string("assets/cycles/udds.csv").expect("run from the repository root");
    let cycle = Cycle::parse(&udds, "udds").expect("the UDDS cycle");

    let b0 = in_use();
    let spec = Vehicle::load(std::path::Path::new(&file)).unwrap_or_else(|e| panic!("{e}")).spec().clone();
    let b1 = in_use();
    // The first vehicles of their file: they build the mode library the file's vehicles
    // share, with room for the modes of several of them alive at once.
    const FIRST: usize = 5;
    let first_layout = build::layout(&spec, Road::Body);
    let first_net = Network::build(&first_layout.spec).expect("builds");
    let copies: Vec<Network> = (0..FIRST).map(|_| first_net.clone()).collect();
    let f0 = in_use();
    let first: Vec<Simulation> =
        copies.into_iter().map(|n| Simulation::with_parameters(n, IntegrationParameters::vehicle())).collect();
    let library_and_first = in_use() - f0;
    // The description and layout, one copy the file's vehicles share.
    let d0 = in_use();
    let (shared_spec, layout) = build::shared(&spec, Road::Body);
    let shared_bytes = in_use() - d0;
    // A further vehicle of the same file, piece by piece: what each vehicle of a fleet adds.
    let b2 = in_use();
    let net = Network::build(&layout.spec).expect("builds");
    let b3 = in_use();
    // (The simulation keeps the network's signals, its own run-time state, and shares the
    // rest with the simulations of an equal network: measured from before the copy.)
    let s4 = in_use();
    let net_copy = net.clone();
    let mut sim = Simulation::with_parameters(net_copy, IntegrationParameters::vehicle());
    let b4 = in_use();
    let sim_bytes = b4 - s4;
    // Its mode cache: the same simulation with 3 slots instead of the default 32.
    let few = IntegrationParameters { mode_cache_slots: 3, ..IntegrationParameters::vehicle() };
    let s3 = in_use();
    let small = Simulation::with_parameters(net.clone(), few);
    let small_bytes = in_use() - s3;
    drop((small, net));
    let b4 = in_use();
    assert!(sim.shares_compiled_modes_with(&first[0]), "one library per file");
    let slots = IntegrationParameters::vehicle().mode_cache_slots;
    let slot = (sim_bytes - small_bytes) / (slots - 3);
    let mut control = VehicleControl::new(shared_spec.clone(), layout.clone(), Road::Body, &sim);
    let mut tel = driveline_core::vehicle::Telemetry::default();
    control.start(&mut sim, &mut tel);
    let b5 = in_use();
    println!("{file}: heap bytes of a vehicle, built and at rest");
    println!("  description (VehicleSpec)         {:>9}", b1 - b0);
    println!("each vehicle of the file:");
    println!(
        "  compiled network (Network)        {:>9}  (built, then shared: the simulation keeps its signals)",
        b3 - b2
    );
    println!("  simulation (Simulation)           {:>9}", sim_bytes);
    println!("    of which the mode cache         {:>9}  ({slots} slots of {slot})", slot * slots);
    println!("    state, workspaces, buffers      {:>9}", sim_bytes - slot * slots);
    println!("  controllers (VehicleControl)      {:>9}", b5 - b4);
    let built = sim_bytes + (b5 - b4);
    println!("  total, the description aside      {:>9}", built);
    println!("shared by the vehicles of the file:");
    println!("  description and layout            {:>9}", shared_bytes);
    println!(
        "  the compiled modes                {:>9}  (as the first {FIRST} vehicles build them)",
        library_and_first - FIRST * sim_bytes
    );
    let mut driver = Driver::new(&spec, DriverParams::default());
    let dt = 1e-3;
    let mut peak_growth = 0usize;
    let mut marks = Vec::new();
    for k in 0..(seconds / dt) as usize {
        let t = (k as f64 * dt) % cycle.duration();
        let _ = t;
        let input = driver.input(&cycle, &tel, dt);
        control.step(&mut sim, &mut tel, &input, dt).unwrap_or_else(|e| panic!("{e}"));
        if k % 60_000 == 0 || k + 1 == (seconds / dt) as usize {
            marks.push((sim.time(), in_use() - b5, sim.stats().mode_compiles));
        }
        peak_growth = peak_growth.max(in_use() - b5.min(in_use()));
    }
    println!("over {seconds} s of UDDS at 1 ms: growth of the heap after the build");
    for (t, g, compiles) in marks {
        println!("  t = {t:6.0} s  +{g:>8} bytes  ({compiles} modes compiled)");
    }
    let end = in_use() - b5;
    println!("  at the end: {} bytes per vehicle (built {built} + grown {end})", built + end);
    drop((sim, control, first, first_net, first_layout, shared_spec, layout));

    // The same vehicles in the Bevy plugin: a world of `N` of them, built by one fixed step.
    let n_plugin: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let e0 = in_use();
    let mut app = bevy_app::App::new();
    app.add_plugins(bevy_driveline::DrivelinePlugins::default());
    let e1 = in_use();
    // The first N build the shared library and its room; the next N are what a fleet adds.
    let spawn = |app: &mut bevy_app::App| {
        for _ in 0..n_plugin {
            bevy_driveline::vehicle::spawn_vehicle(app.world_mut(), spec.clone(), Road::Body).expect("spawns");
        }
        app.world_mut().resource_mut::<bevy_time::Time>().advance_by(std::time::Duration::from_millis(1));
        app.world_mut().run_schedule(bevy_app::FixedUpdate);
    };
    spawn(&mut app);
    let e2 = in_use();
    spawn(&mut app);
    let e3 = in_use();
    let per = (e3 - e2) / n_plugin;
    println!("in the Bevy plugin ({n_plugin} vehicles more than {n_plugin}, built, one step): {per} bytes per vehicle");
    println!("  of which the entities, components and caches of the plugin: {}", per as i64 - built as i64);
    println!("  (the plugin's own resources and schedules: {} bytes once)", e1 - e0);
    println!("process peak: {} bytes", PEAK.load(Relaxed));
    tables(app.world(), 2 * n_plugin);
}

/// The world's tables: for each, its rows, the rows it has room for, and the bytes a row takes
/// (the components' values and their two change ticks, the entity), per vehicle of `vehicles`.
fn tables(world: &bevy_ecs::world::World, vehicles: usize) {
    let (mut used, mut room) = (0usize, 0usize);
    println!("the world's tables, per vehicle: rows, bytes in use, bytes held (room included)");
    for a in world.archetypes().iter() {
        let Some(t) = world.storages().tables.get(a.table_id()) else { continue };
        if a.len() as usize != t.entity_count() as usize {
            continue; // (a table shared by several archetypes: counted once, with the first)
        }
        let row: usize = 8 + a
            .table_components()
            .map(|c| world.components().get_info(c).map_or(0, |i| i.layout().size()) + 8)
            .sum::<usize>();
        let names: Vec<String> = a
            .table_components()
            .filter_map(|c| world.components().get_info(c))
            .map(|i| i.name().to_string().rsplit("::").next().unwrap_or("").to_string())
            .collect();
        let (u, r) = (row * t.entity_count() as usize, row * t.capacity());
        used += u;
        room += r;
        if r / vehicles >= 64 {
            println!(
                "  {:7.1} rows {:6} B {:6} B  [{}]",
                t.entity_count() as f64 / vehicles as f64,
                u / vehicles,
                r / vehicles,
                names.join(", ")
            );
        }
    }
    println!("  all tables: {} B in use, {} B held per vehicle", used / vehicles, room / vehicles);
}
