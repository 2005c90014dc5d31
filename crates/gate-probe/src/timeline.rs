//! The memory timeline: live bytes sampled at every scope boundary and
//! phase mark inside a sampled span ([`super::Recorder::span_sampled`]),
//! read from the same probe as every other figure (the counting allocator
//! on the CPU, the CUDA pool's used bytes on a GPU).
//!
//! Each sample also carries the highest live bytes since the previous
//! sample (the probe's peak is reset at every boundary while sampling), so
//! the highest sample is the span's peak exactly, and the scopes open
//! between those two samples are the blocks alive at the peak.
//!
//! Recording allocates nothing: the [`Sampler`] is made with its full
//! capacity before the profile reads its baseline, and names are copied
//! into a preallocated arena. Otherwise the timeline's own bytes would show
//! up in the figures it explains.

use std::cell::RefCell;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Samples one profile keeps, at most. The report carries every sample of
/// every component (pretty-printed JSON, ~60 bytes each) and the SVG draws
/// each one, so a model with thousands of scope calls per step (a scope
/// per time step of a long sequence) must not grow either without bound.
/// Phase marks and span ends have `RESERVED` slots of their own, so the
/// phases are always marked; scope boundaries past the bound are counted
/// in `dropped`, and their bytes still reach the next stored sample's peak.
pub const MAX_SAMPLES: usize = 1024;
/// Slots kept for phase marks and span ends (a profile makes six).
const RESERVED: usize = 16;
/// Bytes of the name arena and how many distinct names it holds. A name
/// that no longer fits is stored as [`UNRECORDED`].
const NAME_BYTES: usize = 16 * 1024;
const MAX_NAMES: usize = 512;
/// The name of a scope whose name did not fit in the arena.
pub const UNRECORDED: &str = "(name not recorded)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Phase,
    Enter,
    Exit,
    End,
}

#[derive(Debug, Clone, Copy)]
struct Raw {
    t_us: u64,
    live: u64,
    peak: u64,
    kind: Kind,
    name: u32,
    /// Scope boundaries were dropped just before this sample.
    after_drop: bool,
}

/// Preallocated storage for one profile's samples.
#[derive(Debug, Default)]
pub struct Sampler {
    samples: Vec<Raw>,
    names: String,
    spans: Vec<(u32, u32)>,
    dropped: u64,
    /// Highest probe peak seen at boundaries since the last stored sample.
    pending_peak: u64,
    pending_drop: bool,
    started: Option<Instant>,
    base: u64,
}

impl Sampler {
    /// A sampler with room for [`MAX_SAMPLES`]; make it before the
    /// baseline is read.
    pub fn new() -> Self {
        Self::with_capacity(MAX_SAMPLES)
    }

    pub fn with_capacity(samples: usize) -> Self {
        Sampler {
            // Never more than MAX_SAMPLES: readers cut a report's timeline there.
            samples: Vec::with_capacity(samples.clamp(RESERVED + 1, MAX_SAMPLES)),
            names: String::with_capacity(NAME_BYTES),
            spans: Vec::with_capacity(MAX_NAMES),
            ..Default::default()
        }
    }

    /// The live bytes the samples are measured from (the profile's baseline).
    pub fn set_base(&mut self, base: u64) {
        self.base = base;
    }

    fn intern(&mut self, name: &str) -> u32 {
        for (i, &(a, b)) in self.spans.iter().enumerate() {
            if &self.names[a as usize..b as usize] == name {
                return i as u32;
            }
        }
        if self.spans.len() == self.spans.capacity() || self.names.len() + name.len() > self.names.capacity() {
            return u32::MAX;
        }
        let a = self.names.len() as u32;
        self.names.push_str(name);
        self.spans.push((a, self.names.len() as u32));
        (self.spans.len() - 1) as u32
    }

    fn push(&mut self, kind: Kind, name: &str, live: u64, peak_now: u64) {
        self.pending_peak = self.pending_peak.max(peak_now);
        // The allocator may give more room than asked for; MAX_SAMPLES still holds.
        let room = self.samples.capacity().min(MAX_SAMPLES);
        let limit = match kind {
            Kind::Enter | Kind::Exit => room - RESERVED,
            Kind::Phase | Kind::End => room,
        };
        if self.samples.len() >= limit {
            self.dropped += 1;
            self.pending_drop = true;
            return;
        }
        let name = self.intern(name);
        let t_us = self.started.map_or(0, |s| s.elapsed().as_micros() as u64);
        self.samples.push(Raw {
            t_us,
            live,
            peak: self.pending_peak.max(live),
            kind,
            name,
            after_drop: std::mem::take(&mut self.pending_drop),
        });
        self.pending_peak = 0;
    }

    fn name(&self, i: u32) -> String {
        match self.spans.get(i as usize) {
            Some(&(a, b)) => self.names[a as usize..b as usize].to_string(),
            None => UNRECORDED.to_string(),
        }
    }

    /// The samples as a [`Timeline`] (`None` when nothing was sampled).
    /// `source` names the probe (`cpu`, `cuda`).
    pub fn finish(&self, source: &str) -> Option<Timeline> {
        if self.samples.is_empty() {
            return None;
        }
        let samples: Vec<Sample> = self
            .samples
            .iter()
            .map(|r| Sample {
                t_us: r.t_us,
                live: r.live.saturating_sub(self.base),
                peak: r.peak.saturating_sub(self.base),
                event: match r.kind {
                    Kind::Phase => Event::Phase(self.name(r.name)),
                    Kind::Enter => Event::Enter(self.name(r.name)),
                    Kind::Exit => Event::Exit(self.name(r.name)),
                    Kind::End => Event::End,
                },
            })
            .collect();
        let unknown: Vec<usize> = (0..self.samples.len())
            .filter(|&i| self.samples[i].after_drop)
            .collect();
        let peak = Timeline::find_peak(&samples, &unknown);
        Some(Timeline {
            source: source.to_string(),
            base_bytes: self.base,
            samples,
            dropped: self.dropped,
            peak,
        })
    }
}

thread_local! {
    static ACTIVE: RefCell<Option<Sampler>> = const { RefCell::new(None) };
}

/// Whether a sampler is installed on this thread.
pub(super) fn active() -> bool {
    ACTIVE.with(|a| a.borrow().is_some())
}

/// Records a boundary when a sampler is installed on this thread.
/// `peak_now` is the probe's peak since the last boundary.
pub(super) fn record_enter(name: &str, live: u64, peak_now: u64) {
    record(Kind::Enter, name, live, peak_now)
}

pub(super) fn record_exit(name: &str, live: u64, peak_now: u64) {
    record(Kind::Exit, name, live, peak_now)
}

pub(super) fn record_phase(name: &str, live: u64, peak_now: u64) {
    record(Kind::Phase, name, live, peak_now)
}

pub(super) fn record_end(live: u64, peak_now: u64) {
    record(Kind::End, "", live, peak_now)
}

fn record(kind: Kind, name: &str, live: u64, peak_now: u64) {
    ACTIVE.with(|a| {
        if let Some(s) = a.borrow_mut().as_mut() {
            s.push(kind, name, live, peak_now);
        }
    })
}

/// Installs `sampler` on this thread until [`uninstall`]; its clock starts now.
pub(super) fn install(sampler: &mut Sampler) {
    let mut s = std::mem::take(sampler);
    s.started = Some(Instant::now());
    ACTIVE.with(|a| *a.borrow_mut() = Some(s));
}

pub(super) fn uninstall(sampler: &mut Sampler) {
    if let Some(s) = ACTIVE.with(|a| a.borrow_mut().take()) {
        *sampler = s;
    }
}

/// What happened at a sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A phase starts (`forward`, `backward`, `optimizer`, `inference`).
    Phase(String),
    /// A scope is entered (its full dotted path).
    Enter(String),
    /// A scope is left.
    Exit(String),
    /// The sampled span ends (the end of the training step, of the inference call).
    End,
}

impl Event {
    /// `phase:forward`, `enter:encoder_vsn.grn`, `exit:encoder_vsn.grn`, `end`.
    pub fn tag(&self) -> String {
        match self {
            Event::Phase(n) => format!("phase:{n}"),
            Event::Enter(n) => format!("enter:{n}"),
            Event::Exit(n) => format!("exit:{n}"),
            Event::End => "end".into(),
        }
    }

    fn from_tag(tag: &str) -> Result<Self, String> {
        if tag == "end" {
            return Ok(Event::End);
        }
        match tag.split_once(':') {
            Some(("phase", n)) => Ok(Event::Phase(n.into())),
            Some(("enter", n)) => Ok(Event::Enter(n.into())),
            Some(("exit", n)) => Ok(Event::Exit(n.into())),
            _ => Err(format!(
                "unknown timeline event `{tag}` (expected phase:NAME, enter:NAME, exit:NAME or end)"
            )),
        }
    }
}

/// One sample, written as one string, `"T_US LIVE PEAK EVENT"`
/// (`"980 2061470 2189198 exit:mlp"`): the report is pretty-printed, and a
/// sample as an array would take six lines, a thousand samples 300 KB.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Sample {
    /// Microseconds since the sampled span started.
    pub t_us: u64,
    /// Live bytes above the baseline at the boundary.
    pub live: u64,
    /// The highest live bytes above the baseline since the previous sample
    /// of the same span (≥ `live`).
    pub peak: u64,
    pub event: Event,
}

impl From<Sample> for String {
    fn from(s: Sample) -> Self {
        format!("{} {} {} {}", s.t_us, s.live, s.peak, s.event.tag())
    }
}

impl TryFrom<String> for Sample {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        // The event is the rest: a block's name may hold spaces.
        let mut parts = text.splitn(4, ' ');
        let mut number = |what: &str| -> Result<u64, String> {
            parts
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("timeline sample `{text}`: no {what} (expected \"T_US LIVE PEAK EVENT\")"))
        };
        let (t_us, live, peak) = (number("time")?, number("live bytes")?, number("peak bytes")?);
        let event = Event::from_tag(parts.next().unwrap_or(""))?;
        Ok(Sample {
            t_us,
            live,
            peak,
            event,
        })
    }
}

/// Where the highest sample is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelinePeak {
    /// Bytes above the baseline (the highest `peak` of any sample).
    pub bytes: u64,
    /// The first sample with that peak: the peak lies between it and the one before.
    pub sample: usize,
    /// The phase it is in.
    pub phase: Option<String>,
    /// The scopes open there, outermost first (full dotted paths); empty
    /// when no scope was open. `None` when scope boundaries right before it
    /// were dropped (past [`MAX_SAMPLES`]), so which were open is not known.
    pub blocks: Option<Vec<String>>,
}

/// Live bytes over one training step and one inference call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// The probe: `cpu` (the counting allocator) or `cuda` (the pool's used bytes).
    pub source: String,
    /// The live bytes (absolute) that the samples are measured from: the
    /// profile's baseline after warm-up, the same as `training_peak`'s.
    pub base_bytes: u64,
    /// At most [`MAX_SAMPLES`], also when read: a report from an artifact
    /// may hold any number, and the recorder never keeps more.
    #[serde(deserialize_with = "at_most_max_samples")]
    pub samples: Vec<Sample>,
    /// Scope boundaries not stored because the bound was reached.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
    pub peak: Option<TimelinePeak>,
}

/// The first [`MAX_SAMPLES`] samples of a list; the rest are skipped
/// unread (#28 item 13: 60,000 samples in a report took the comment a minute).
fn at_most_max_samples<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Sample>, D::Error> {
    struct Capped;
    impl<'de> serde::de::Visitor<'de> for Capped {
        type Value = Vec<Sample>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of timeline samples")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Sample>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_SAMPLES));
            while out.len() < MAX_SAMPLES {
                match seq.next_element()? {
                    Some(s) => out.push(s),
                    None => return Ok(out),
                }
            }
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(out)
        }
    }
    d.deserialize_seq(Capped)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Timeline {
    /// The highest sample, its phase and the scopes open before it.
    /// `unknown` lists samples right after dropped boundaries.
    fn find_peak(samples: &[Sample], unknown: &[usize]) -> Option<TimelinePeak> {
        let bytes = samples.iter().map(|s| s.peak).max()?;
        let at = samples.iter().position(|s| s.peak == bytes)?;
        let (phase, stack) = Self::state_before(samples, at);
        Some(TimelinePeak {
            bytes,
            sample: at,
            phase,
            blocks: (!unknown.contains(&at)).then_some(stack),
        })
    }

    /// The phase and the open scopes after samples `..i`, i.e. between
    /// sample `i - 1` and sample `i`. The runner marks phases between model
    /// calls, so no scope stays open across a phase mark or a span's end.
    pub fn state_before(samples: &[Sample], i: usize) -> (Option<String>, Vec<String>) {
        let mut phase = None;
        let mut stack: Vec<String> = Vec::new();
        for s in &samples[..i.min(samples.len())] {
            match &s.event {
                Event::Phase(p) => {
                    phase = Some(p.clone());
                    stack.clear();
                }
                Event::Enter(n) => stack.push(n.clone()),
                Event::Exit(n) => {
                    if let Some(pos) = stack.iter().rposition(|x| x == n) {
                        stack.truncate(pos);
                    }
                }
                Event::End => {
                    phase = None;
                    stack.clear();
                }
            }
        }
        (phase, stack)
    }

    /// The phase regions in sample indices: `(phase, first, last)`, where
    /// `first` is the phase's mark and `last` the next mark or span end.
    pub fn phases(&self) -> Vec<(String, usize, usize)> {
        let mut out: Vec<(String, usize, usize)> = Vec::new();
        let mut open: Option<(String, usize)> = None;
        for (i, s) in self.samples.iter().enumerate() {
            match &s.event {
                Event::Phase(p) => {
                    if let Some((q, a)) = open.take() {
                        out.push((q, a, i));
                    }
                    open = Some((p.clone(), i));
                }
                Event::End => {
                    if let Some((q, a)) = open.take() {
                        out.push((q, a, i));
                    }
                }
                _ => {}
            }
        }
        if let Some((q, a)) = open {
            out.push((q, a, self.samples.len() - 1));
        }
        out
    }
}
