//! The typed part components: one per kind of element, with that element's parameters as
//! public fields in SI units. They are the truth users read and edit; the plugin keeps the
//! compiled network in step with them (see the crate docs, "Editing parts").
//!
//! Each component mirrors a variant of [`ElementKind`] (the file format) field by field, with
//! the same units, defaults and meaning: the element catalogue of `driveline_core` documents
//! the equations, [`ElementKind`] each parameter. Fields that are functions of time or tables
//! ([`Signal`], [`Table1D`], maps) are wrapped in small reflectable types that serialize as
//! they do in the files. Friction clutches, one-way clutches and brakes share one component,
//! [`Clutch`], told apart by [`ClutchKind`].

use bevy_ecs::entity::{EntityMapper, MapEntities};
use bevy_ecs::prelude::*;
use bevy_reflect::prelude::*;
use driveline_core::model::Regularization;
use driveline_core::{ConverterSpec, ElementKind, MagicFormula, Signal, Table1D, TorqueMapSpec};
use serde::{Deserialize, Serialize};

use crate::{BodyState, CouplingState};

/// A typed part component: converts to and from the [`ElementKind`] it mirrors.
pub trait ElementComponent: Component<Mutability = bevy_ecs::component::Mutable> + Clone + PartialEq {
    /// The [`ElementKind`] variant(s) it mirrors, as named in files.
    const KIND: &'static str;
    /// `(file name, field name)` of the parameters named differently here (`J` is `j`).
    const RENAMES: &'static [(&'static str, &'static str)];
    /// The element this component describes.
    fn to_kind(&self) -> ElementKind;
    /// The component of `kind`, if `kind` is the variant this component mirrors.
    fn from_kind(kind: &ElementKind) -> Option<Self>;
}

/// The element a part is, as the solver last accepted it (the file form, validated): kept by
/// the plugin from the part's typed component. A typed component edited to an invalid value is
/// set back from this. Read it to see what the network was built from.
///
/// A part spawned from a vehicle description refers to the element in the description's layout,
/// which the vehicles of one description share, until its typed component is edited.
#[derive(Component, Debug, Clone, Default)]
#[component(on_insert = element_inserted)]
pub struct PartElement(Accepted);

/// A part's [`PartElement`] was inserted (a part spawned, or its element replaced): its
/// driveline is rebuilt at the next sync. (The plugin's own edits of an element in place mark
/// the driveline in `sync::accept`; the sync then need not scan every part's element for a
/// change every tick.)
fn element_inserted(mut world: bevy_ecs::world::DeferredWorld, ctx: bevy_ecs::lifecycle::HookContext) {
    let Some(root) = world.get::<crate::PartOf>(ctx.entity).map(|p| p.0) else { return };
    if let Some(mut cache) = world.get_mut::<crate::DrivelineCache>(root) {
        cache.bypass_change_detection().restructured = true;
        crate::Book::mark(&mut world, root);
    }
}

/// Where a part's accepted element is kept.
#[derive(Debug, Clone, Default)]
enum Accepted {
    /// None yet (a part whose typed component has not been accepted).
    #[default]
    None,
    /// Element `k` of a vehicle layout, shared by the vehicles of its description.
    Shared(std::sync::Arc<driveline_core::vehicle::build::Layout>, usize),
    /// The part's own (accepted from an edit, or spawned from a scenario).
    Own(Box<ElementKind>),
}

impl PartElement {
    /// The element, once the typed component has been accepted.
    pub fn kind(&self) -> Option<&ElementKind> {
        match &self.0 {
            Accepted::None => None,
            Accepted::Shared(layout, k) => Some(&layout.spec.elements[*k].kind),
            Accepted::Own(kind) => Some(kind),
        }
    }

    /// Element `k` of `layout`, accepted (the layout's network was built).
    pub(crate) fn shared(layout: std::sync::Arc<driveline_core::vehicle::build::Layout>, k: usize) -> Self {
        PartElement(Accepted::Shared(layout, k))
    }

    /// Accepts `kind`.
    pub(crate) fn set(&mut self, kind: ElementKind) {
        self.0 = Accepted::Own(Box::new(kind));
    }
}

impl PartialEq for PartElement {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind()
    }
}

/// A signal parameter (a function of time, or a run-time input), written in files as a
/// [`Signal`]. Serialized as the signal.
#[derive(Reflect, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SignalParam(pub Signal);

/// A 1-D table parameter (a friction coefficient over slip speed), written in files as a
/// [`Table1D`].
#[derive(Reflect, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TableParam(pub Table1D);

/// An engine torque map ([`TorqueMapSpec`]).
#[derive(Reflect, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TorqueMapParam(pub TorqueMapSpec);

/// A torque converter's characteristic ([`ConverterSpec`]).
#[derive(Reflect, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConverterParam(pub ConverterSpec);

/// A tyre's simplified Magic Formula ([`MagicFormula`]).
#[derive(Reflect, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TyreParam(pub MagicFormula);

/// The regularised sign of a [`SignTorque`] (`driveline_core::model::Regularization`), as an
/// opaque reflected value.
#[derive(Reflect, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RegularizationParam(pub Regularization);

macro_rules! wrap {
    ($w:ident, $t:ty) => {
        impl From<$t> for $w {
            fn from(v: $t) -> Self {
                $w(v)
            }
        }
        impl From<$w> for $t {
            fn from(v: $w) -> Self {
                v.0
            }
        }
    };
}
wrap!(SignalParam, Signal);
wrap!(TableParam, Table1D);
wrap!(TorqueMapParam, TorqueMapSpec);
wrap!(ConverterParam, ConverterSpec);
wrap!(TyreParam, MagicFormula);
wrap!(RegularizationParam, Regularization);

/// Declares the typed components that mirror an [`ElementKind`] variant field by field.
macro_rules! element_components {
    // The variant built from a component (`this`), with each field under its file name.
    (@build $this:ident $v:ident [$($acc:tt)*]) => { ElementKind::$v { $($acc)* } };
    (@build $this:ident $v:ident [$($acc:tt)*] ($field:ident $orig:ident) $($rest:tt)*) => {
        element_components!(@build $this $v [$($acc)* $orig: $this.$field.clone().into(),] $($rest)*)
    };
    (@build $this:ident $v:ident [$($acc:tt)*] ($field:ident) $($rest:tt)*) => {
        element_components!(@build $this $v [$($acc)* $field: $this.$field.clone().into(),] $($rest)*)
    };
    // The pattern binding each field of the variant to the component's field name.
    (@pat $v:ident [$($acc:tt)*]) => { ElementKind::$v { $($acc)* } };
    (@pat $v:ident [$($acc:tt)*] ($field:ident $orig:ident) $($rest:tt)*) => {
        element_components!(@pat $v [$($acc)* $orig: $field,] $($rest)*)
    };
    (@pat $v:ident [$($acc:tt)*] ($field:ident) $($rest:tt)*) => {
        element_components!(@pat $v [$($acc)* $field,] $($rest)*)
    };
    // The struct, requiring its state: the first of the states listed (a body's `BodyState`,
    // else `CouplingState`).
    (@require [$state:ident $($other:ident)*] $(#[$m:meta])* pub struct $name:ident $body:tt) => {
        $(#[$m])*
        #[require(PartElement, $state)]
        pub struct $name $body
    };
    ($(
        $(#[$meta:meta])*
        $comp:ident from $variant:ident $([$($derive:ident),*])? $(: $state:ident)? {
            $( $(#[$fmeta:meta])* $field:ident $(as $orig:ident)? : $ty:ty ),* $(,)?
        }
    )*) => {
        $(
            element_components!(@require [$($state)? CouplingState]
                $(#[$meta])*
                #[derive(Component, Reflect, Debug, Clone, PartialEq $($(, $derive)*)?)]
                #[reflect(Component, Debug, Clone, PartialEq)]
                pub struct $comp {
                    $( $(#[$fmeta])* pub $field: $ty, )*
                }
            );

            impl ElementComponent for $comp {
                const KIND: &'static str = stringify!($variant);
                const RENAMES: &'static [(&'static str, &'static str)] =
                    &[$( $( (stringify!($orig), stringify!($field)), )? )*];
                #[allow(clippy::useless_conversion, clippy::clone_on_copy, unused_variables)]
                fn to_kind(&self) -> ElementKind {
                    let this = self;
                    element_components!(@build this $variant [] $( ($field $($orig)?) )*)
                }
                #[allow(clippy::useless_conversion, clippy::clone_on_copy)]
                fn from_kind(kind: &ElementKind) -> Option<Self> {
                    match kind {
                        element_components!(@pat $variant [] $( ($field $($orig)?) )*) => {
                            Some(Self { $( $field: $field.clone().into(), )* })
                        }
                        _ => None,
                    }
                }
            }
        )*

        /// Inserts the typed component of `kind` into `entity`.
        pub(crate) fn insert_typed(entity: &mut EntityWorldMut, kind: &ElementKind) {
            if let Some(c) = Clutch::from_kind(kind) {
                entity.insert(c);
                return;
            }
            $(
                if let Some(c) = $comp::from_kind(kind) {
                    entity.insert(c);
                    return;
                }
            )*
        }

        /// Registers every typed component for reflection.
        pub(crate) fn register_types(app: &mut bevy_app::App) {
            app.register_type::<Clutch>().register_type::<ClutchKind>();
            $( app.register_type::<$comp>(); )*
        }

        /// A scan of each typed part component's changes (see [`crate::sync::collect_edits`]).
        pub(crate) fn typed_scans(world: &mut World) -> Vec<Box<dyn crate::sync::EditScan>> {
            vec![
                Box::new(crate::sync::TypedScan::<Clutch>::new(world)),
                $( Box::new(crate::sync::TypedScan::<$comp>::new(world)), )*
            ]
        }
    };
}

element_components! {
    /// A rotating body (MSL `Inertia`). Its angle and speed are in [`BodyState`].
    Inertia from Inertia [Default]: BodyState {
        /// Moment of inertia, kg m^2 (>= 0; 0 makes a massless junction).
        j as J: f64,
        /// Fixed initial angle, rad (`None`: determined by the others).
        phi_start: Option<f64>,
        /// Fixed initial speed, rad/s (`None`: determined by the others).
        w_start: Option<f64>,
    }
    /// The ground at a fixed angle (MSL `Fixed`).
    Fixed from Fixed [Default] {
        /// Angle of the flange, rad.
        phi0: f64,
    }
    /// A torque source (MSL `Torque`): `flange.tau = -tau(t)`.
    TorqueSource from Torque [Default] {
        /// Torque, N m.
        tau: SignalParam,
        /// The reaction goes to a `support` flange (else to the ground).
        use_support: bool,
    }
    /// A speed source (MSL `Speed`, exact): the flange turns at `w_ref(t)`.
    SpeedSource from Speed [Default] {
        /// Speed reference, rad/s.
        w_ref: SignalParam,
        /// The reaction goes to a `support` flange.
        use_support: bool,
        /// Fixed initial angle, rad.
        phi_start: Option<f64>,
    }
    /// A position source (MSL `Position`, exact): the flange is at `phi_ref(t)`.
    PositionSource from Position [Default] {
        /// Angle reference, rad.
        phi_ref: SignalParam,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A kinematic (functional) clutch after Tiller: a speed difference that closes in
    /// `shift_time` once commanded.
    KinematicClutch from KinematicClutch [Default] {
        /// Engagement command (> 0.5 engaged).
        command: SignalParam,
        /// Time to close the slip, s (> 0).
        shift_time: f64,
    }
    /// A constant torque (MSL `ConstantTorque`).
    ConstantTorque from ConstantTorque [Default] {
        /// Torque, N m.
        tau_constant: f64,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A torque step (MSL `TorqueStep`).
    TorqueStep from TorqueStep [Default] {
        /// Height of the step, N m.
        step_torque: f64,
        /// Torque before the step, N m.
        offset_torque: f64,
        /// Time of the step, s.
        start_time: f64,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A torque quadratic in speed (MSL `QuadraticSpeedDependentTorque`).
    QuadraticSpeedDependentTorque from QuadraticSpeedDependentTorque [Default] {
        /// Torque at `w_nominal`, N m.
        tau_nominal: f64,
        /// Speed of `tau_nominal`, rad/s (> 0).
        w_nominal: f64,
        /// Same torque in both directions (else it changes sign with the speed).
        torque_direction: bool,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A torque linear in speed (MSL `LinearSpeedDependentTorque`).
    LinearSpeedDependentTorque from LinearSpeedDependentTorque [Default] {
        /// Torque at `w_nominal`, N m (negative: a load).
        tau_nominal: f64,
        /// Speed of `tau_nominal`, rad/s (> 0).
        w_nominal: f64,
        /// Same torque in both directions (else it changes sign with the speed).
        torque_direction: bool,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A torque inverse to speed, a constant power (MSL `InverseSpeedDependentTorque`).
    InverseSpeedDependentTorque from InverseSpeedDependentTorque [Default] {
        /// Torque at `w_nominal`, N m.
        tau_nominal: f64,
        /// Speed of `tau_nominal`, rad/s (> 0).
        w_nominal: f64,
        /// Speed below which the torque is regularised, rad/s (> 0).
        w0: f64,
        /// Same torque in both directions (else it changes sign with the speed).
        torque_direction: bool,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A constant torque whose sign follows the speed (MSL `SignTorque`).
    SignTorque from SignTorque [Default] {
        /// Torque magnitude, N m (negative: a load).
        tau_nominal: f64,
        /// Speed at which the regularised sign reaches +-1, rad/s (> 0).
        w0: f64,
        /// Shape of the regularisation.
        reg: RegularizationParam,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A torque from a signal between two flanges (MSL `Torque2`): `+tau` on `flange_b`,
    /// `-tau` on `flange_a`.
    Torque2 from Torque2 [Default] {
        /// Torque, N m.
        tau: SignalParam,
    }
    /// Prescribed motion from an angle, a speed and an acceleration signal (MSL `Move`).
    MoveSource from Move [Default] {
        /// Angle, rad.
        phi: SignalParam,
        /// Speed, rad/s.
        w: SignalParam,
        /// Acceleration, rad/s^2.
        a: SignalParam,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A prescribed acceleration (MSL `Accelerate`): the speed is `w_start` plus the integral
    /// of `a_ref`.
    Accelerate from Accelerate [Default] {
        /// Acceleration, rad/s^2.
        a_ref: SignalParam,
        /// Initial speed relative to the support, rad/s.
        w_start: f64,
        /// Fixed initial angle, rad.
        phi_start: Option<f64>,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A constant speed source (MSL `ConstantSpeed`).
    ConstantSpeed from ConstantSpeed [Default] {
        /// Speed of the flange relative to the support, rad/s.
        w_fixed: f64,
        /// The reaction goes to a `support` flange.
        use_support: bool,
        /// Fixed initial angle, rad.
        phi_start: Option<f64>,
    }
    /// An angle sensor (MSL `AngleSensor`); its readings are
    /// `CouplingState::phi_rel` (the angle) and `w_rel` (the speed).
    AngleSensor from AngleSensor [Default] {}
    /// A speed sensor (MSL `SpeedSensor`); its reading is `CouplingState::w_rel`.
    SpeedSensor from SpeedSensor [Default] {}
    /// A relative angle sensor (MSL `RelAngleSensor`); its reading is `CouplingState::phi_rel`.
    RelAngleSensor from RelAngleSensor [Default] {}
    /// A relative speed sensor (MSL `RelSpeedSensor`); its reading is `CouplingState::w_rel`.
    RelSpeedSensor from RelSpeedSensor [Default] {}
    /// A torque sensor (MSL `TorqueSensor`): a rigid joint; its reading is
    /// `CouplingState::torque` (`flange_a.tau`).
    TorqueSensor from TorqueSensor [Default] {}
    /// A power sensor (MSL `PowerSensor`): a rigid joint; its power is `CouplingState::torque`
    /// times `CouplingState::w_rel` (the joint's speed).
    PowerSensor from PowerSensor [Default] {}
    /// A multi sensor (MSL `MultiSensor`): a rigid joint with `CouplingState::torque`, `w_rel`
    /// (the joint's speed) and their product, the power.
    MultiSensor from MultiSensor [Default] {}
    /// An eddy current brake (MSL `EddyCurrentTorque`): braking torque
    /// `2 tau_nominal x / (1 + x^2)`, `x = w / (w_nominal (1 + alpha20 (T - t_ref)))`, with `T`
    /// its `heatPort`'s temperature (or `t` when the port is open).
    EddyCurrentTorque from EddyCurrentTorque [Default] {
        /// Maximum braking torque, N m (a signal).
        tau_nominal: SignalParam,
        /// Speed of the maximum torque at `t_ref`, rad/s (> 0).
        w_nominal: f64,
        /// Reference temperature, K.
        t_ref as TRef: f64,
        /// Temperature coefficient of the disc's resistance at 20 degC, 1/K.
        alpha20: f64,
        /// Operating temperature when `heatPort` is open, K.
        t as T: f64,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A lumped heat capacity (MSL `HeatCapacitor`): `C dT/dt = Q_flow`.
    HeatCapacitor from HeatCapacitor [Default] {
        /// Heat capacity, J/K (> 0).
        c as C: f64,
        /// Initial temperature, K.
        t_start as T_start: f64,
    }
    /// Heat conduction (MSL `ThermalConductor`): `Q_flow = g (T_a - T_b)`.
    ThermalConductor from ThermalConductor [Default] {
        /// Thermal conductance, W/K (>= 0).
        g as G: f64,
    }
    /// Convective heat transfer (MSL `Convection`): `Q_flow = gc (T_solid - T_fluid)`.
    Convection from Convection [Default] {
        /// Convective conductance, W/K (a signal).
        gc as Gc: SignalParam,
    }
    /// A fixed temperature (MSL `FixedTemperature`): an infinite heat reservoir.
    FixedTemperature from FixedTemperature [Default] {
        /// Temperature, K.
        t as T: f64,
    }
    /// A fixed heat flow into a port (MSL `FixedHeatFlow`): `q_flow (1 + alpha (T - t_ref))` W.
    FixedHeatFlow from FixedHeatFlow [Default] {
        /// Heat flow at `t_ref`, W.
        q_flow as Q_flow: f64,
        /// Reference temperature, K.
        t_ref as T_ref: f64,
        /// Temperature coefficient, 1/K.
        alpha: f64,
    }
    /// Relative states (MSL `RelativeStates`): no torque; names `phi_rel` and `w_rel` between
    /// its flanges (in `CouplingState`) and may fix their start values.
    RelativeStates from RelativeStates [Default] {
        /// Fixed initial relative angle, rad.
        phi_rel_start: Option<f64>,
        /// Fixed initial relative speed, rad/s.
        w_rel_start: Option<f64>,
    }
    /// The initial angle and speed of a flange (MSL `InitializeFlange`), no torque.
    InitializeFlange from InitializeFlange [Default] {
        /// Fixed initial angle, rad.
        phi_start: Option<f64>,
        /// Fixed initial speed, rad/s.
        w_start: Option<f64>,
    }
    /// An acceleration sensor (MSL `AccSensor`): no torque; the core's
    /// `Simulation::element_acceleration` and the CSV column `NAME.a` read it.
    AccSensor from AccSensor [Default] {}
    /// A relative acceleration sensor (MSL `RelAccSensor`): no torque; the core's
    /// `Simulation::element_acceleration` and the CSV column `NAME.a_rel` read it.
    RelAccSensor from RelAccSensor [Default] {}
    /// A rigid joint with an angle offset (MSL `Disc`): `phi_b = phi_a + delta_phi`.
    Disc from Disc [Default] {
        /// Angle of `flange_b` ahead of `flange_a`, rad.
        delta_phi as deltaPhi: f64,
    }
    /// An ideal gear from rotation to translation (MSL `IdealGearR2T`): `phi_R = ratio s_T`.
    IdealGearR2T from IdealGearR2T [Default] {
        /// Transmission ratio, rad/m (non-zero).
        ratio: f64,
    }
    /// An ideal gear (MSL `IdealGear`): `phi_a = ratio phi_b`.
    IdealGear from IdealGear [Default] {
        /// Gear ratio `phi_a / phi_b` (non-zero).
        ratio: f64,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A gear with meshing and bearing losses (MSL `LossyGear`).
    LossyGear from LossyGear {
        /// Gear ratio `phi_a / phi_b` (non-zero).
        ratio: f64,
        /// Loss table rows `[w_a, eta_mf1, eta_mf2, tau_bf1, tau_bf2]` (MSL `lossTable`).
        loss_table: Vec<[f64; 5]>,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A gearbox (MSL `Gearbox`): a lossy gear to the mesh, then an elasto-backlash to
    /// `flange_b`.
    Gearbox from Gearbox {
        /// Gear ratio `phi_a / phi_mesh` (non-zero).
        ratio: f64,
        /// Loss table rows `[w_a, eta_mf1, eta_mf2, tau_bf1, tau_bf2]` (MSL `lossTable`).
        loss_table: Vec<[f64; 5]>,
        /// Gear elasticity, N m/rad (> 0).
        c: f64,
        /// Gear damping, N m s/rad (>= 0).
        d: f64,
        /// Total backlash, rad (>= 0).
        b: f64,
        /// The reaction goes to a `support` flange.
        use_support: bool,
        /// Fixed initial relative angle across the elasticity, rad.
        phi_rel_start: Option<f64>,
        /// Fixed initial relative speed across the elasticity, rad/s.
        w_rel_start: Option<f64>,
    }
    /// An ideal planetary set (MSL `IdealPlanetary`): sun, carrier, ring.
    IdealPlanetary from IdealPlanetary [Default] {
        /// Ring teeth over sun teeth (> 0).
        ratio: f64,
    }
    /// A linear spring (MSL `Spring`).
    Spring from Spring [Default] {
        /// Stiffness, N m/rad (> 0).
        c: f64,
        /// Unstretched relative angle, rad.
        phi_rel0: f64,
        /// Fixed initial relative angle, rad.
        phi_rel_start: Option<f64>,
        /// Fixed initial relative speed, rad/s.
        w_rel_start: Option<f64>,
    }
    /// A linear damper (MSL `Damper`).
    Damper from Damper [Default] {
        /// Damping, N m s/rad (>= 0).
        d: f64,
        /// Fixed initial relative angle, rad.
        phi_rel_start: Option<f64>,
        /// Fixed initial relative speed, rad/s.
        w_rel_start: Option<f64>,
    }
    /// A spring and a damper in parallel (MSL `SpringDamper`).
    SpringDamper from SpringDamper [Default] {
        /// Stiffness, N m/rad (> 0).
        c: f64,
        /// Damping, N m s/rad (>= 0).
        d: f64,
        /// Unstretched relative angle, rad.
        phi_rel0: f64,
        /// Fixed initial relative angle, rad.
        phi_rel_start: Option<f64>,
        /// Fixed initial relative speed, rad/s.
        w_rel_start: Option<f64>,
    }
    /// A spring-damper with backlash (MSL `ElastoBacklash`).
    ElastoBacklash from ElastoBacklash [Default] {
        /// Stiffness in contact, N m/rad (> 0).
        c: f64,
        /// Damping in contact, N m s/rad (>= 0).
        d: f64,
        /// Total backlash, rad (>= 0).
        b: f64,
        /// Unstretched relative angle, rad.
        phi_rel0: f64,
        /// Fixed initial relative angle, rad.
        phi_rel_start: Option<f64>,
        /// Fixed initial relative speed, rad/s.
        w_rel_start: Option<f64>,
    }
    /// MSL `ElastoBacklash2`: as [`ElastoBacklash`], but the whole spring-damper torque acts
    /// in contact while it pushes (it jumps by the damping part when contact starts).
    ElastoBacklash2 from ElastoBacklash2 [Default] {
        /// Stiffness in contact, N m/rad (> 0).
        c: f64,
        /// Damping in contact, N m s/rad (>= 0).
        d: f64,
        /// Total backlash, rad (>= 0).
        b: f64,
        /// Unstretched relative angle, rad.
        phi_rel0: f64,
        /// Fixed initial relative angle, rad.
        phi_rel_start: Option<f64>,
        /// Fixed initial relative speed, rad/s.
        w_rel_start: Option<f64>,
    }
    /// A clutch that slips past a torque limit and is elastic below it.
    ElasticClutch from ElasticClutch [Default] {
        /// Stiffness while stuck, N m/rad (> 0).
        s as S: f64,
        /// Damping while stuck, N m s/rad (>= 0).
        d as D: f64,
        /// Torque limit, N m (<= 0: open).
        limit: SignalParam,
        /// Fixed initial relative angle, rad.
        phi_rel_start: Option<f64>,
        /// Fixed initial relative speed, rad/s.
        w_rel_start: Option<f64>,
    }
    /// Bearing friction (MSL `BearingFriction`).
    BearingFriction from BearingFriction {
        /// Friction torque over speed, N m over rad/s.
        tau_pos: TableParam,
        /// Static over kinetic friction at zero speed (>= 1).
        peak: f64,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A translational body (MSL `Translational.Components.Mass`): a vehicle's body.
    Mass from Mass [Default]: BodyState {
        /// Mass, kg (>= 0).
        m: f64,
        /// Fixed initial position, m.
        s_start: Option<f64>,
        /// Fixed initial velocity, m/s.
        v_start: Option<f64>,
    }
    /// A wheel rolling without slip (MSL `IdealRollingWheel`).
    IdealRollingWheel from IdealRollingWheel [Default] {
        /// Radius, m (> 0).
        radius: f64,
    }
    /// A force quadratic in velocity (MSL `QuadraticSpeedDependentForce`): aerodynamic drag.
    QuadraticSpeedDependentForce from QuadraticSpeedDependentForce [Default] {
        /// Force at `v_nominal`, N.
        f_nominal: f64,
        /// Velocity of `f_nominal`, m/s (> 0).
        v_nominal: f64,
        /// Same force in both directions.
        force_direction: bool,
    }
    /// A force source (MSL `Translational.Sources.Force`).
    ForceSource from Force [Default] {
        /// Force, N.
        f: SignalParam,
    }
    /// A velocity source (MSL `Translational.Sources.Speed`).
    LinearSpeedSource from LinearSpeed [Default] {
        /// Velocity reference, m/s.
        v_ref: SignalParam,
        /// Fixed initial position, m.
        s_start: Option<f64>,
        /// The speed is relative to the `support` flange (a contact point on a chassis).
        use_support: bool,
    }
    /// An engine: the torque map at the throttle, on its crankshaft flange.
    Engine from Engine {
        /// Full- and zero-load torque over speed, with friction.
        map: TorqueMapParam,
        /// Throttle, [0, 1].
        throttle: SignalParam,
        /// The reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A hydrodynamic torque converter: pump (impeller), turbine, stator on a freewheel.
    TorqueConverter from TorqueConverter [Default] {
        /// Capacity factor and torque ratio over speed ratio.
        map: ConverterParam,
        /// The stator reaction goes to a `support` flange.
        use_support: bool,
    }
    /// A dog clutch with backlash (the sleeve's teeth in the idler's).
    DogClutch from DogClutch [Default] {
        /// Number of dogs (> 0).
        teeth: u32,
        /// Contact stiffness, N m/rad (> 0).
        c: f64,
        /// Contact damping, N m s/rad (>= 0).
        d: f64,
        /// Backlash between the dogs, rad (>= 0).
        backlash: f64,
        /// Angular offset of the dogs, rad.
        offset: f64,
        /// Engagement (> 0.5: in).
        engaged: SignalParam,
    }
    /// A limited-slip pack across a differential: preload plus ramps on the input torque.
    LimitedSlip from LimitedSlip [Default] {
        /// Preload torque, N m (>= 0).
        preload: f64,
        /// Locking torque per input torque under power (>= 0).
        power_ramp: f64,
        /// Locking torque per input torque on the overrun (>= 0).
        coast_ramp: f64,
        /// The gears whose torques make the input torque: `(element, factor)`.
        input: Vec<(String, f64)>,
        /// The differential's carrier element.
        carrier: String,
    }
    /// A tyre: the simplified Magic Formula between a wheel and the road.
    Tyre from Tyre [Default] {
        /// Rolling radius, m (> 0).
        radius: f64,
        /// The Magic Formula coefficients.
        mf: TyreParam,
        /// Normal load, N.
        load: SignalParam,
        /// Slip speed below which the slip is taken relative to it, m/s (> 0).
        v_low: f64,
    }
}

/// Which friction element a [`Clutch`] is.
#[derive(Reflect, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[reflect(Debug, Clone, PartialEq, Default)]
pub enum ClutchKind {
    /// A friction clutch between two shafts (MSL `Clutch`).
    #[default]
    Clutch,
    /// A clutch that locks in one direction only (MSL `OneWayClutch`).
    OneWay,
    /// A brake between a shaft and its housing (MSL `Brake`).
    Brake,
}

/// A friction clutch, one-way clutch or brake: `tau = cgeo fn_max u mu(w_rel)` sliding, up to
/// `peak` times that stuck (MSL `Clutch`, `OneWayClutch`, `Brake`; the element catalogue has
/// the equations). Editing it on a running driveline applies from the next step.
#[derive(Component, Reflect, Debug, Clone, PartialEq)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
#[require(PartElement, CouplingState, ClutchEngagement)]
pub struct Clutch {
    /// Which friction element this is.
    pub kind: ClutchKind,
    /// Largest normal force, N (>= 0): `u = 1` applies it.
    pub fn_max: f64,
    /// Kinetic friction coefficient over relative speed (rad/s).
    pub mu_pos: TableParam,
    /// Static over kinetic friction at zero slip (>= 1). Default 1.
    pub peak: f64,
    /// Geometry constant, m (mean friction radius times the number of faces). Default 1.
    pub cgeo: f64,
    /// Normalised normal force `u`, [0, 1] (the solve reads it; see [`ClutchEngagement`]).
    pub f_normalized: SignalParam,
    /// Brakes: the reaction goes to a `support` flange.
    pub use_support: bool,
    /// Clutches: fixed initial relative angle, rad.
    pub phi_rel_start: Option<f64>,
    /// Clutches: fixed initial relative speed, rad/s.
    pub w_rel_start: Option<f64>,
}

impl Default for Clutch {
    fn default() -> Self {
        Self {
            kind: ClutchKind::Clutch,
            fn_max: 0.0,
            mu_pos: TableParam(Table1D::constant(0.5)),
            peak: 1.0,
            cgeo: 1.0,
            f_normalized: SignalParam(Signal::Constant(0.0)),
            use_support: false,
            phi_rel_start: None,
            w_rel_start: None,
        }
    }
}

impl ElementComponent for Clutch {
    const KIND: &'static str = "Clutch, OneWayClutch or Brake";
    const RENAMES: &'static [(&'static str, &'static str)] = &[];

    fn to_kind(&self) -> ElementKind {
        let (mu_pos, peak, cgeo, fn_max) = (self.mu_pos.0.clone(), self.peak, self.cgeo, self.fn_max);
        let f_normalized = self.f_normalized.0.clone();
        let (phi_rel_start, w_rel_start) = (self.phi_rel_start, self.w_rel_start);
        match self.kind {
            ClutchKind::Clutch => {
                ElementKind::Clutch { mu_pos, peak, cgeo, fn_max, f_normalized, phi_rel_start, w_rel_start }
            }
            ClutchKind::OneWay => {
                ElementKind::OneWayClutch { mu_pos, peak, cgeo, fn_max, f_normalized, phi_rel_start, w_rel_start }
            }
            ClutchKind::Brake => {
                ElementKind::Brake { mu_pos, peak, cgeo, fn_max, f_normalized, use_support: self.use_support }
            }
        }
    }

    fn from_kind(kind: &ElementKind) -> Option<Self> {
        let c = |kind, mu: &Table1D, peak: &f64, cgeo: &f64, fn_max: &f64, f: &Signal| Clutch {
            kind,
            fn_max: *fn_max,
            mu_pos: TableParam(mu.clone()),
            peak: *peak,
            cgeo: *cgeo,
            f_normalized: SignalParam(f.clone()),
            use_support: false,
            phi_rel_start: None,
            w_rel_start: None,
        };
        Some(match kind {
            ElementKind::Clutch { mu_pos, peak, cgeo, fn_max, f_normalized, phi_rel_start, w_rel_start } => Clutch {
                phi_rel_start: *phi_rel_start,
                w_rel_start: *w_rel_start,
                ..c(ClutchKind::Clutch, mu_pos, peak, cgeo, fn_max, f_normalized)
            },
            ElementKind::OneWayClutch { mu_pos, peak, cgeo, fn_max, f_normalized, phi_rel_start, w_rel_start } => {
                Clutch {
                    phi_rel_start: *phi_rel_start,
                    w_rel_start: *w_rel_start,
                    ..c(ClutchKind::OneWay, mu_pos, peak, cgeo, fn_max, f_normalized)
                }
            }
            ElementKind::Brake { mu_pos, peak, cgeo, fn_max, f_normalized, use_support } => {
                Clutch { use_support: *use_support, ..c(ClutchKind::Brake, mu_pos, peak, cgeo, fn_max, f_normalized) }
            }
            _ => return None,
        })
    }
}

/// The normalised normal force of a [`Clutch`] part (0 open .. 1 fully applied) the solve
/// uses.
///
/// The plugin writes it after every step with the value the step used. A value a user system
/// writes after that and before [`crate::DrivelineSystems::Solve`] (for example ordered
/// `.after(DrivelineSystems::Actuation).before(DrivelineSystems::Solve)`) is the engagement of
/// the coming step, where the clutch's `f_normalized` is a run-time input
/// ([`Signal::Input`]): on a plain driveline it sets that input (and holds until changed); on
/// a vehicle it wins over the built-in actuator for that step, sub-steps included, so a
/// system that overrides every step (a launch control) writes it every step. Values outside
/// [0, 1] are clamped; NaN, or a write to a clutch whose force is a function of time, is
/// refused with a [`crate::DrivelineEditRefused`] message and the last valid value kept.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct ClutchEngagement(pub f64);

/// Every typed part component's reflection data, and the other reflectable plugin types.
pub(crate) fn register_all(app: &mut bevy_app::App) {
    register_types(app);
    app.register_type::<ClutchEngagement>()
        .register_type::<SignalParam>()
        .register_type::<TableParam>()
        .register_type::<TorqueMapParam>()
        .register_type::<ConverterParam>()
        .register_type::<TyreParam>()
        .register_type::<RegularizationParam>();
}

/// Maps the entity of a flange joint (scene loading, entity cloning).
impl MapEntities for crate::Connection {
    fn map_entities<E: EntityMapper>(&mut self, mapper: &mut E) {
        self.to = mapper.get_mapped(self.to);
    }
}
