//! The Driveline example car: a car on an endless road, driven with a gamepad or the keyboard.
//! See the library's docs (`driveline_car`) for the cars, the keys and the headless check.
//!
//! ```text
//! cargo run -p driveline_car --release                     # choose the car at start
//! cargo run -p driveline_car --release -- --car auto       # straight into the 8HP sedan
//! ```

use bevy::prelude::*;
use clap::Parser;
use driveline_car::{Args, app, scene::ScenePlugin};
use driveline_core::vehicle::Road;

fn main() -> AppExit {
    let Some(mut app) = app(Args::parse(), "Driveline: example car", Road::Body) else { return AppExit::error() };
    app.add_plugins(ScenePlugin);
    app.run()
}
