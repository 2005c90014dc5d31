//! The contract's JSON Schemas (report.json, history.json, shard.json, the
//! run's events, the harness protocol's `__resolve` answer and `profile`
//! lines), generated from the types that read them.
//!
//! A tracer stands in for the JSON: it walks a type's `Deserialize` the way
//! serde_json would feed it, answers every request with a sample value, and
//! writes down what was asked for (a string, a number, an object with these
//! fields, one of these variants). So the schema is what gate's own reader
//! accepts, field for field, and a change to a type changes it;
//! tests/it/schema.rs holds the checked-in copies (schema/*.schema.json) to
//! the types, and what gate writes to them.
//!
//! What a reader may rely on: every field's name and type, every variant.
//! What it does not say: which fields are required. serde fills a missing
//! field that has a default (`#[serde(default)]`, an `Option`), and a
//! tracer cannot see the attribute, so no field is marked required.

use std::collections::BTreeMap;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};
use serde_json::{json, Map, Value};

/// The draft the schema is written in.
const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The texts a string is traced with, in turn, until its type reads one: a
/// name or a sentence takes the first; a string-encoded type (a budget's
/// `<`, a timeline sample's `T_US LIVE PEAK EVENT`) one of the others.
const SAMPLE_TEXTS: &[&str] = &["", "<", "0", "0 0 0 end", "0 B", "f32", "cpu", "a"];

/// How many passes over the type may pick enum variants before giving up
/// (each pass takes the next variant of every enum it reached).
const MAX_PASSES: usize = 512;

/// The JSON Schema of `T` as serde_json reads it: `$defs` for each struct
/// and enum, the root a `$ref` to `root`'s definition.
pub fn schema_for<T: DeserializeOwned>(title: &str) -> Result<Value, String> {
    let mut t = Tracer::default();
    for _ in 0..MAX_PASSES {
        t.path.clear();
        t.last_string = None;
        if let Err(e) = T::deserialize(&mut t) {
            // A string its type did not read: the next sample text there.
            let site = t.last_string.take().ok_or(e.0.clone())?;
            let choice = t.string_choice.entry(site.clone()).or_insert(0);
            *choice += 1;
            if *choice >= SAMPLE_TEXTS.len() {
                return Err(format!("{site}: no sample text is read ({})", e.0));
            }
            continue;
        }
        if t.enums.values().all(|e| e.shapes.len() >= e.variants.len()) {
            let root = std::mem::take(&mut t.out);
            let mut defs = Map::new();
            for (name, def) in std::mem::take(&mut t.defs) {
                defs.insert(name, def);
            }
            for (name, e) in &t.enums {
                defs.insert(name.to_string(), e.schema());
            }
            let mut schema = Map::new();
            schema.insert("$schema".into(), DIALECT.into());
            schema.insert("title".into(), title.into());
            if let Value::Object(root) = root {
                schema.extend(root);
            }
            schema.insert("$defs".into(), Value::Object(defs));
            return Ok(Value::Object(schema));
        }
        // An enum still open moves to its next variant once a pass has
        // reached it; one already covered keeps cycling, so that the variants
        // leading to enums still open below it are taken again (an enum
        // inside one variant of another is reached only through it).
        for e in t.enums.values_mut() {
            let covered = e.shapes.len() >= e.variants.len();
            if covered || e.visited {
                e.next += 1;
            }
            e.visited = false;
        }
    }
    Err(format!("enum variants still untraced after {MAX_PASSES} passes"))
}

#[derive(Debug)]
struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// An enum's variants and the shape of each one traced so far.
#[derive(Debug)]
struct EnumTrace {
    variants: &'static [&'static str],
    /// By variant index: `None` for a unit variant, else its content's schema.
    shapes: BTreeMap<usize, Option<Value>>,
    /// The variant the next pass picks (modulo the variants).
    next: usize,
    /// Whether this pass reached it.
    visited: bool,
}

impl EnumTrace {
    /// serde_json's external tagging: a unit variant is its name, any
    /// other `{ "name": content }`.
    fn schema(&self) -> Value {
        if self.shapes.values().all(Option::is_none) {
            return json!({ "enum": self.variants });
        }
        let one_of: Vec<Value> = self
            .variants
            .iter()
            .enumerate()
            .map(|(i, name)| match self.shapes.get(&i) {
                Some(Some(content)) => json!({
                    "type": "object",
                    "properties": { *name: content },
                    "required": [name],
                    "additionalProperties": false,
                }),
                _ => json!({ "const": name }),
            })
            .collect();
        json!({ "oneOf": one_of })
    }
}

#[derive(Default)]
struct Tracer {
    /// Each struct's schema, by name.
    defs: BTreeMap<String, Value>,
    /// The structs being traced: a type that contains itself is refused.
    stack: Vec<&'static str>,
    enums: BTreeMap<&'static str, EnumTrace>,
    /// The schema of the value the last call traced.
    out: Value,
    /// Where the tracer is: field names, `[]` for an element, `{}` for a map value.
    path: Vec<&'static str>,
    /// The sample text each string site is traced with (an index into [`SAMPLE_TEXTS`]).
    string_choice: BTreeMap<String, usize>,
    /// The last string site a pass asked for.
    last_string: Option<String>,
}

impl Tracer {
    fn reference(name: &str) -> Value {
        json!({ "$ref": format!("#/$defs/{name}") })
    }

    /// A struct's fields traced into the definition `def` (its name; a
    /// struct variant's is `Enum.Variant`), its schema a reference to it.
    fn traced_struct<'de, V: Visitor<'de>>(
        &mut self,
        name: &'static str,
        def_name: String,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        if self.stack.contains(&name) {
            return Err(Error(format!(
                "`{name}` contains itself: the tracer cannot describe it"
            )));
        }
        self.stack.push(name);
        let mut access = Fields {
            tracer: self,
            fields,
            at: 0,
            properties: Map::new(),
        };
        let v = visitor.visit_map(&mut access);
        let properties = std::mem::take(&mut access.properties);
        self.stack.pop();
        let v = v?;
        let def = json!({ "type": "object", "properties": properties });
        // Two types of one name (a private `Raw` inside a reader): numbered.
        let mut key = def_name.clone();
        let mut n = 1;
        while self.defs.get(&key).is_some_and(|d| *d != def) {
            n += 1;
            key = format!("{def_name}{n}");
        }
        self.defs.insert(key.clone(), def);
        self.out = Tracer::reference(&key);
        Ok(v)
    }

    /// The sample text for the string here, noted as the pass's last.
    fn sample_text(&mut self) -> &'static str {
        let site = self.path.join(".");
        let text = SAMPLE_TEXTS[self.string_choice.get(&site).copied().unwrap_or(0)];
        self.last_string = Some(site);
        text
    }

    /// Traces one value through `seed`, returning it and its schema.
    fn trace<'de, S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<(S::Value, Value), Error> {
        let v = seed.deserialize(&mut *self)?;
        Ok((v, std::mem::take(&mut self.out)))
    }
}

macro_rules! scalar {
    ($($method:ident => $visit:ident($sample:expr), $schema:tt;)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                let v = visitor.$visit($sample)?;
                self.out = json!($schema);
                Ok(v)
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for &mut Tracer {
    type Error = Error;

    scalar! {
        deserialize_bool => visit_bool(false), { "type": "boolean" };
        deserialize_i8 => visit_i8(0), { "type": "integer" };
        deserialize_i16 => visit_i16(0), { "type": "integer" };
        deserialize_i32 => visit_i32(0), { "type": "integer" };
        deserialize_i64 => visit_i64(0), { "type": "integer" };
        deserialize_u8 => visit_u8(0), { "type": "integer", "minimum": 0 };
        deserialize_u16 => visit_u16(0), { "type": "integer", "minimum": 0 };
        deserialize_u32 => visit_u32(0), { "type": "integer", "minimum": 0 };
        deserialize_u64 => visit_u64(0), { "type": "integer", "minimum": 0 };
        deserialize_f32 => visit_f32(0.0), { "type": "number" };
        deserialize_f64 => visit_f64(0.0), { "type": "number" };
        deserialize_char => visit_char('a'), { "type": "string" };

        deserialize_bytes => visit_bytes(&[]), { "type": "string" };
        deserialize_byte_buf => visit_byte_buf(Vec::new()), { "type": "string" };
        deserialize_identifier => visit_str(""), { "type": "string" };
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let text = self.sample_text();
        let v = visitor.visit_str(text)?;
        self.out = json!({ "type": "string" });
        Ok(v)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let v = visitor.visit_unit()?;
        self.out = json!({ "type": "null" });
        Ok(v)
    }

    /// A self-describing value (serde_json's `Value`): any JSON.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let v = visitor.visit_unit()?;
        self.out = json!({});
        Ok(v)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_any(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let v = visitor.visit_some(&mut *self)?;
        let inner = std::mem::take(&mut self.out);
        self.out = json!({ "anyOf": [inner, { "type": "null" }] });
        Ok(v)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let mut access = Elements {
            tracer: self,
            left: 1,
            items: Vec::new(),
        };
        let v = visitor.visit_seq(&mut access)?;
        let items = access.items.pop().unwrap_or_else(|| json!({}));
        self.out = json!({ "type": "array", "items": items });
        Ok(v)
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        let mut access = Elements {
            tracer: self,
            left: len,
            items: Vec::new(),
        };
        let v = visitor.visit_seq(&mut access)?;
        let items = std::mem::take(&mut access.items);
        self.out = json!({ "type": "array", "prefixItems": items, "minItems": len, "maxItems": len });
        Ok(v)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let mut access = Entry {
            tracer: self,
            done: false,
            value: None,
        };
        let v = visitor.visit_map(&mut access)?;
        let value = access.value.take().unwrap_or_else(|| json!({}));
        self.out = json!({ "type": "object", "additionalProperties": value });
        Ok(v)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.traced_struct(name, name.to_string(), fields, visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let trace = self.enums.entry(name).or_insert_with(|| EnumTrace {
            variants,
            shapes: BTreeMap::new(),
            next: 0,
            visited: false,
        });
        trace.visited = true;
        let index = trace.next % variants.len().max(1);
        let v = visitor.visit_enum(Variant {
            tracer: &mut *self,
            name,
            index,
        })?;
        self.out = Tracer::reference(name);
        Ok(v)
    }
}

/// A sequence of `left` elements, each traced.
struct Elements<'t> {
    tracer: &'t mut Tracer,
    left: usize,
    items: Vec<Value>,
}

impl<'de> de::SeqAccess<'de> for &mut Elements<'_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        self.tracer.path.push("[]");
        let traced = self.tracer.trace(seed);
        self.tracer.path.pop();
        let (v, schema) = traced?;
        self.items.push(schema);
        Ok(Some(v))
    }
}

/// A map of one entry: a sample key, its value traced.
struct Entry<'t> {
    tracer: &'t mut Tracer,
    done: bool,
    value: Option<Value>,
}

impl<'de> de::MapAccess<'de> for &mut Entry<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        if self.done {
            return Ok(None);
        }
        self.done = true;
        // The key through the tracer too: a map keyed by an enum names its variant.
        self.tracer.path.push("{key}");
        let traced = self.tracer.trace(seed);
        self.tracer.path.pop();
        let (k, _) = traced?;
        Ok(Some(k))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        self.tracer.path.push("{}");
        let traced = self.tracer.trace(seed);
        self.tracer.path.pop();
        let (v, schema) = traced?;
        self.value = Some(schema);
        Ok(v)
    }
}

/// A struct's fields, every one given, each traced.
struct Fields<'t> {
    tracer: &'t mut Tracer,
    fields: &'static [&'static str],
    at: usize,
    properties: Map<String, Value>,
}

impl<'de> de::MapAccess<'de> for &mut Fields<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        match self.fields.get(self.at) {
            Some(field) => seed.deserialize(field.into_deserializer()).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let field = self.fields[self.at];
        self.at += 1;
        self.tracer.path.push(field);
        let traced = self.tracer.trace(seed);
        self.tracer.path.pop();
        let (v, schema) = traced?;
        self.properties.insert(field.to_string(), schema);
        Ok(v)
    }
}

/// The variant a pass picks, and its content traced.
struct Variant<'t> {
    tracer: &'t mut Tracer,
    name: &'static str,
    index: usize,
}

impl<'de, 't> de::EnumAccess<'de> for Variant<'t> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self), Error> {
        let variants = self.tracer.enums[self.name].variants;
        let v = seed.deserialize(variants[self.index].into_deserializer())?;
        Ok((v, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        self.record(None);
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        let (v, schema) = self.tracer.trace(seed)?;
        self.record(Some(schema));
        Ok(v)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        let v = de::Deserializer::deserialize_tuple(&mut *self.tracer, len, visitor)?;
        let schema = std::mem::take(&mut self.tracer.out);
        self.record(Some(schema));
        Ok(v)
    }

    fn struct_variant<V: Visitor<'de>>(self, fields: &'static [&'static str], visitor: V) -> Result<V::Value, Error> {
        let variant = self.tracer.enums[self.name].variants[self.index];
        let def = format!("{}.{variant}", self.name);
        let v = self.tracer.traced_struct(self.name, def, fields, visitor)?;
        let schema = std::mem::take(&mut self.tracer.out);
        self.record(Some(schema));
        Ok(v)
    }
}

impl Variant<'_> {
    fn record(self, shape: Option<Value>) {
        if let Some(e) = self.tracer.enums.get_mut(self.name) {
            e.shapes.insert(self.index, shape);
        }
    }
}

/// The schema of report.json ([`crate::report::Report`]), as the
/// checked-in schema/report.schema.json holds it.
pub fn report_schema() -> Value {
    let title = format!("gate report.json, schema {}", crate::report::SCHEMA);
    schema_for::<crate::report::Report>(&title).expect("every type of a report can be traced")
}

/// The schema of history.json (a metric over the stored baselines, beside
/// report.json when a budget failed or regressed).
pub fn history_schema() -> Value {
    let title = format!("gate history.json, schema {}", crate::history::SCHEMA);
    schema_for::<crate::history::History>(&title).expect("the history can be traced")
}

/// The schema of shard.json (a sharded check's record, read by `gate merge`).
pub fn shard_schema() -> Value {
    schema_for::<crate::shard::Record>("gate shard.json").expect("a shard's record can be traced")
}

/// The schema of plan.json (`gate plan`'s plan of one component).
pub fn plan_schema() -> Value {
    schema_for::<crate::plan::Plan>(&format!("gate plan.json, schema {}", crate::plan::SCHEMA))
        .expect("a plan can be traced")
}

/// The schema of sweep.json (`gate plan --sweep`'s grid of one component).
pub fn sweep_schema() -> Value {
    schema_for::<crate::sweep::Sweep>(&format!("gate sweep.json, schema {}", crate::sweep::SCHEMA))
        .expect("a sweep can be traced")
}

/// The schema of one line of `--message-format json` (a run's events).
pub fn events_schema() -> Value {
    let title = format!(
        "gate --message-format json: one event, version {}",
        crate::event::VERSION
    );
    schema_for::<crate::event::Event>(&title).expect("a run's events can be traced")
}

/// The schemas of the harness protocol's two answers (gate-runner's
/// `harness` and `child`): `__resolve`'s one JSON line, and each line
/// `profile` writes.
pub fn protocol_schemas() -> Vec<(&'static str, Value)> {
    let version = crate::protocol::PROTOCOL;
    let resolve = schema_for::<crate::protocol::ResolveAnswer>(&format!(
        "gate harness protocol {version}: the answer to `__resolve`"
    ));
    let events =
        schema_for::<crate::protocol::ChildEvent>(&format!("gate harness protocol {version}: one line of `profile`"));
    vec![
        ("harness-resolve", resolve.expect("the resolve answer can be traced")),
        ("harness-event", events.expect("a profile's events can be traced")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_of_an_enum_with_content_is_traced() {
        #[derive(serde::Deserialize)]
        #[allow(dead_code)]
        enum Shape {
            Dot,
            Circle(f64),
            Box { w: u32, h: u32 },
        }
        let s = schema_for::<Vec<Shape>>("shapes").unwrap();
        let one_of = s["$defs"]["Shape"]["oneOf"].as_array().unwrap();
        assert_eq!(one_of.len(), 3, "{s}");
        assert_eq!(one_of[0], json!({ "const": "Dot" }));
        assert_eq!(one_of[1]["properties"]["Circle"], json!({ "type": "number" }));
        assert_eq!(s["items"]["$ref"], "#/$defs/Shape");
    }

    #[test]
    fn the_protocols_answers_trace() {
        assert_eq!(protocol_schemas().len(), 2);
    }

    #[test]
    fn a_string_encoded_type_is_traced_with_a_text_it_reads() {
        let s = report_schema();
        assert_eq!(s["$defs"]["Report"]["type"], "object");
        // A budget's operator reads only `<`, `<=`, `>`, `>=`.
        assert_eq!(s["$defs"]["BudgetResult"]["properties"]["op"]["type"], "string");
    }
}
