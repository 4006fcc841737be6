//! Snapshots: everything the next step of a vehicle depends on, saved and restored bit for bit.
//!
//! A [`VehicleSnapshot`] is the vehicle's dynamic state as a flat list of 64-bit words (a
//! floating-point value as its bits, so NaN, infinities and the sign of zero come back as they
//! were): the solver's state (angles, speeds, friction modes, law regimes, run-time inputs), the
//! caches that change results (the stage predictor, the kept Newton Jacobian, the complementarity
//! warm start, the last sub-step's forces), the energy ledger, and every controller (engine
//! controller, clutch actuator and temperatures, shift linkages, the TCU mid-shift with its
//! pistons). What follows from the description alone (the network, the compiled modes, the
//! controllers' parameters) is not in it: a snapshot restores into a vehicle built from the same
//! description, which a fingerprint of the description checks.
//!
//! Each part of the state lists its dynamic fields once ([`Persist`]); saving writes them in that
//! order and restoring reads them back in the same order.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The version of the word layout. A snapshot of another layout is refused.
pub(crate) const FORMAT: u32 = 2;

/// The whole dynamic state of a [`crate::Vehicle`]: restoring it into a vehicle of the same
/// description continues bit for bit. Made by [`crate::Vehicle::snapshot`], applied by
/// [`crate::Vehicle::restore`].
///
/// It serializes with serde: in a text format (RON, JSON) the state is a hexadecimal string,
/// 16 digits a word; in a binary format (postcard, bincode) it is raw little-endian bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VehicleSnapshot {
    /// The word layout's version.
    pub format: u32,
    /// Fingerprint of the vehicle's description (its [`crate::VehicleSpec`] and road): a snapshot
    /// restores only into a vehicle with the same.
    pub vehicle: u64,
    /// Simulated time at the snapshot, s.
    pub time: f64,
    /// The state words.
    #[serde(serialize_with = "save_words", deserialize_with = "load_words")]
    pub(crate) state: Vec<u64>,
}

impl VehicleSnapshot {
    /// Size of the state, bytes (8 a word; the serialized form adds a few bytes of header).
    pub fn state_bytes(&self) -> usize {
        self.state.len() * 8
    }

    /// The state words (for tests and tools that compare states).
    #[doc(hidden)]
    pub fn state_words(&self) -> &[u64] {
        &self.state
    }
}

/// Why a snapshot could not be restored. The vehicle is left as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// The snapshot was taken of a vehicle with another description (another spec, another
    /// parameter, another road).
    #[error(
        "the snapshot is of another vehicle description (fingerprint {snapshot:016x}, this vehicle {vehicle:016x})"
    )]
    OtherVehicle {
        /// The snapshot's fingerprint.
        snapshot: u64,
        /// This vehicle's fingerprint.
        vehicle: u64,
    },
    /// The snapshot's word layout is of another version of this library.
    #[error("the snapshot's format is {found}; this library reads format {expected}")]
    Format {
        /// The snapshot's format.
        found: u32,
        /// The format this library writes.
        expected: u32,
    },
    /// The state does not fit this vehicle (truncated, or edited).
    #[error("the snapshot's state is damaged: {0}")]
    Damaged(&'static str),
}

fn save_words<S: Serializer>(words: &[u64], s: S) -> Result<S::Ok, S::Error> {
    if s.is_human_readable() {
        let mut text = String::with_capacity(words.len() * 16);
        for w in words {
            use std::fmt::Write;
            let _ = write!(text, "{w:016x}");
        }
        s.serialize_str(&text)
    } else {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        s.serialize_bytes(&bytes)
    }
}

fn load_words<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    use serde::de::Error;
    if d.is_human_readable() {
        let text = String::deserialize(d)?;
        if !text.len().is_multiple_of(16) || !text.is_ascii() {
            return Err(D::Error::custom("the state must be hexadecimal, 16 digits a word"));
        }
        (0..text.len() / 16)
            .map(|k| {
                u64::from_str_radix(&text[16 * k..16 * (k + 1)], 16)
                    .map_err(|_| D::Error::custom("the state must be hexadecimal, 16 digits a word"))
            })
            .collect()
    } else {
        let bytes: Vec<u8> = serde_bytes_vec(d)?;
        if !bytes.len().is_multiple_of(8) {
            return Err(D::Error::custom("the state must be a whole number of 8-byte words"));
        }
        Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
    }
}

/// Bytes from a binary format, whether it hands them over as bytes or as a sequence.
fn serde_bytes_vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    struct Bytes;
    impl<'de> serde::de::Visitor<'de> for Bytes {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("bytes")
        }
        fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
        fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(b) = seq.next_element()? {
                out.push(b);
            }
            Ok(out)
        }
    }
    d.deserialize_byte_buf(Bytes)
}

/// Writes state words.
pub(crate) struct StateWriter {
    pub(crate) words: Vec<u64>,
    /// With `Some`, the name of the field each run of words starts with (a map of the layout
    /// for tests that locate a difference).
    pub(crate) labels: Option<Vec<(usize, &'static str)>>,
}

/// Reads state words back in the order they were written.
#[derive(Clone)]
pub(crate) struct StateReader<'a> {
    words: &'a [u64],
    pos: usize,
}

impl StateWriter {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self { words: Vec::with_capacity(n), labels: None }
    }

    /// Names the field whose words come next (when a layout map is asked for).
    #[inline]
    pub(crate) fn label(&mut self, name: &'static str) {
        if let Some(l) = &mut self.labels {
            l.push((self.words.len(), name));
        }
    }

    #[inline]
    pub(crate) fn word(&mut self, w: u64) {
        self.words.push(w);
    }
}

impl<'a> StateReader<'a> {
    pub(crate) fn new(words: &'a [u64]) -> Self {
        Self { words, pos: 0 }
    }

    #[inline]
    pub(crate) fn word(&mut self) -> Result<u64, SnapshotError> {
        let w = *self.words.get(self.pos).ok_or(SnapshotError::Damaged("it ends early"))?;
        self.pos += 1;
        Ok(w)
    }

    /// The next `n` words.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u64], SnapshotError> {
        let words = self.words.get(self.pos..self.pos + n).ok_or(SnapshotError::Damaged("it ends early"))?;
        self.pos += n;
        Ok(words)
    }

    /// Every word was read.
    pub(crate) fn finish(&self) -> Result<(), SnapshotError> {
        if self.pos == self.words.len() { Ok(()) } else { Err(SnapshotError::Damaged("it has words left over")) }
    }
}

/// A part of the dynamic state: its fields written and read back in one order.
pub(crate) trait Persist {
    fn save(&self, w: &mut StateWriter);
    fn load(&mut self, r: &mut StateReader) -> Result<(), SnapshotError>;

    /// Saves a run of values (one word each for numbers: a copy, not a loop of pushes).
    fn save_slice(items: &[Self], w: &mut StateWriter)
    where
        Self: Sized,
    {
        items.iter().for_each(|x| x.save(w));
    }

    /// Loads a run of values saved by [`Persist::save_slice`].
    fn load_slice(items: &mut [Self], r: &mut StateReader) -> Result<(), SnapshotError>
    where
        Self: Sized,
    {
        items.iter_mut().try_for_each(|x| x.load(r))
    }
}

impl Persist for f64 {
    #[inline]
    fn save(&self, w: &mut StateWriter) {
        w.word(self.to_bits());
    }
    #[inline]
    fn load(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
        *self = f64::from_bits(r.word()?);
        Ok(())
    }
    fn save_slice(items: &[f64], w: &mut StateWriter) {
        w.words.extend(items.iter().map(|x| x.to_bits()));
    }
    fn load_slice(items: &mut [f64], r: &mut StateReader) -> Result<(), SnapshotError> {
        let words = r.take(items.len())?;
        for (x, &b) in items.iter_mut().zip(words) {
            *x = f64::from_bits(b);
        }
        Ok(())
    }
}

macro_rules! persist_int {
    ($($t:ty: $wide:ty),*) => {$(
        impl Persist for $t {
            #[inline]
            fn save(&self, w: &mut StateWriter) {
                w.word(*self as $wide as u64);
            }
            #[inline]
            fn load(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
                *self = <$t>::try_from(r.word()? as $wide).map_err(|_| SnapshotError::Damaged("an integer is out of range"))?;
                Ok(())
            }
        }
    )*};
}
persist_int!(u64: u64, u32: u64, usize: u64, u8: u64, i32: i64, i8: i64);

impl Persist for bool {
    #[inline]
    fn save(&self, w: &mut StateWriter) {
        w.word(*self as u64);
    }
    #[inline]
    fn load(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
        *self = match r.word()? {
            0 => false,
            1 => true,
            _ => return Err(SnapshotError::Damaged("a flag is neither 0 nor 1")),
        };
        Ok(())
    }
}

impl<T: Persist + Default> Persist for Option<T> {
    fn save(&self, w: &mut StateWriter) {
        match self {
            None => w.word(0),
            Some(v) => {
                w.word(1);
                v.save(w);
            }
        }
    }
    fn load(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
        match r.word()? {
            0 => *self = None,
            1 => {
                let mut v = self.take().unwrap_or_default();
                v.load(r)?;
                *self = Some(v);
            }
            _ => return Err(SnapshotError::Damaged("an option tag is neither 0 nor 1")),
        }
        Ok(())
    }
}

/// A vector of the length the description gives it: the length is checked, not changed.
impl<T: Persist> Persist for Vec<T> {
    fn save(&self, w: &mut StateWriter) {
        self.as_slice().save(w);
    }
    fn load(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
        self.as_mut_slice().load(r)
    }
}

impl<T: Persist> Persist for [T] {
    fn save(&self, w: &mut StateWriter) {
        w.word(self.len() as u64);
        T::save_slice(self, w);
    }
    fn load(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
        if r.word()? != self.len() as u64 {
            return Err(SnapshotError::Damaged("a list has another length than this vehicle's"));
        }
        T::load_slice(self, r)
    }
}

impl<T: Persist, const N: usize> Persist for [T; N] {
    fn save(&self, w: &mut StateWriter) {
        T::save_slice(self, w);
    }
    fn load(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
        T::load_slice(self, r)
    }
}

/// Tuples: their items in order.
macro_rules! persist_tuple {
    ($($t:ident $i:tt),+) => {
        impl<$($t: Persist),+> Persist for ($($t,)+) {
            fn save(&self, w: &mut StateWriter) {
                $( self.$i.save(w); )+
            }
            fn load(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
                $( self.$i.load(r)?; )+
                Ok(())
            }
        }
    };
}
persist_tuple!(A 0, B 1);
persist_tuple!(A 0, B 1, C 2);
persist_tuple!(A 0, B 1, C 2, D 3);

/// `Persist` for a struct from the list of its dynamic fields (the others are parameters the
/// description fixes).
macro_rules! persist_fields {
    ($ty:ty { $($f:tt),* $(,)? }) => {
        impl $crate::snapshot::Persist for $ty {
            fn save(&self, w: &mut $crate::snapshot::StateWriter) {
                $( w.label(concat!(stringify!($ty), ".", stringify!($f))); $crate::snapshot::Persist::save(&self.$f, w); )*
            }
            fn load(&mut self, r: &mut $crate::snapshot::StateReader) -> Result<(), $crate::snapshot::SnapshotError> {
                $( $crate::snapshot::Persist::load(&mut self.$f, r)?; )*
                Ok(())
            }
        }
    };
}
pub(crate) use persist_fields;

/// `Persist` for an enum without data, by the position of its variant.
macro_rules! persist_enum {
    ($ty:ty { $($v:ident),* $(,)? }) => {
        impl $crate::snapshot::Persist for $ty {
            fn save(&self, w: &mut $crate::snapshot::StateWriter) {
                const ALL: &[$ty] = &[$(<$ty>::$v),*];
                w.word(ALL.iter().position(|v| v == self).expect("every variant listed") as u64);
            }
            fn load(&mut self, r: &mut $crate::snapshot::StateReader) -> Result<(), $crate::snapshot::SnapshotError> {
                const ALL: &[$ty] = &[$(<$ty>::$v),*];
                *self = *ALL.get(r.word()? as usize).ok_or($crate::snapshot::SnapshotError::Damaged("an unknown variant"))?;
                Ok(())
            }
        }
    };
}
pub(crate) use persist_enum;

/// FNV-1a of a text: the fingerprint of a description.
pub(crate) fn fingerprint(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}
