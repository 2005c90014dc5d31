//! The baseline store: reports kept in the repository itself, one JSON per
//! commit and card (`reports/<card>/<sha>.json`, see [`card_of`]) on a
//! dedicated orphan branch, listed in one request through the git trees
//! API, read and written through the contents API. Several cards' baselines
//! live side by side; a store written before cards (`reports/<sha>.json`,
//! one card per branch) is read as before. Writes carry the blob sha, so a
//! concurrent update is a 409/422 that is re-read and retried, after a
//! randomised wait.

use std::collections::{BTreeSet, HashMap};

use base64::Engine;
use serde::Deserialize;

use super::client::{Client, Method};
use super::context::Repo;
use super::error::{Call, GithubError};
use gate_contract::report::Report;

mod layout;
use layout::is_card;
pub use layout::{card_of, stored_at, Place};

pub const DEFAULT_BRANCH: &str = "gate-baselines";
/// First-parent steps walked at most when looking for a baseline.
pub const DEFAULT_DEPTH: usize = 50;
/// Stored reports the comment's history shows by default (the baseline
/// included; `gate check --history N` sets another number, at most
/// [`HISTORY_MAX`]), and the first-parent commits walked at most to find
/// them. They bound the requests a pull request run makes for it, which it
/// makes only when a budget failed or regressed: a commit page per 100
/// commits and one read per stored report (at most twice the number asked
/// where the store is too large to list).
pub const HISTORY_REPORTS: usize = 10;
pub const HISTORY_MAX: usize = 20;
pub const HISTORY_DEPTH: usize = 200;
/// Attempts to publish against concurrent writers: a push to the default
/// branch may start one publish per gate id and runner at the same moment,
/// each of which moves the branch, so more than one or two lose a race.
pub const PUBLISH_ATTEMPTS: u32 = 8;

pub struct Store<'a> {
    pub client: &'a Client,
    pub repo: &'a Repo,
    pub branch: String,
}

#[derive(Debug, Deserialize)]
struct FileEntry {
    name: String,
    sha: String,
    /// `file` or `dir` in a folder's listing.
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    encoding: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Blob {
    content: String,
}

#[derive(Debug, Deserialize)]
struct ShaOnly {
    sha: String,
}

#[derive(Debug, Deserialize)]
struct CommitEntry {
    sha: String,
    #[serde(default)]
    parents: Vec<ShaOnly>,
}

/// GitHub's "Get a tree" answer, the fields gate reads.
#[derive(Debug, Deserialize)]
struct Tree {
    #[serde(default)]
    tree: Vec<TreeEntry>,
    /// More entries than one answer holds (100,000 or 7 MB).
    #[serde(default)]
    truncated: bool,
}

#[derive(Debug, Deserialize)]
struct TreeEntry {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

/// What the store holds, as far as one listing says.
#[derive(Debug, Clone)]
enum Listing {
    /// No branch or no report on it yet.
    Empty,
    /// Each stored commit's places.
    Known(HashMap<String, BTreeSet<Place>>),
    /// The listing was cut short (GitHub's limit): probe commit by commit,
    /// the layout of before cards and these cards' folders.
    TooMany { cards: Vec<String> },
}

impl Listing {
    fn cards(&self) -> BTreeSet<String> {
        match self {
            Listing::Empty => BTreeSet::new(),
            Listing::Known(map) => map
                .values()
                .flatten()
                .filter_map(|p| match p {
                    Place::Card(c) => Some(c.clone()),
                    Place::BeforeCards => None,
                })
                .collect(),
            Listing::TooMany { cards } => cards.iter().cloned().collect(),
        }
    }

    fn has_before_cards(&self) -> bool {
        match self {
            Listing::Empty => false,
            Listing::Known(map) => map.values().any(|p| p.contains(&Place::BeforeCards)),
            Listing::TooMany { .. } => true,
        }
    }
}

/// What a run has learnt of the store and of the commit history: the
/// listing and the first parents read so far. Kept, so that reading the
/// history after the verdict asks GitHub only for what it does not know.
#[derive(Default, Clone)]
pub struct Known {
    listing: Option<Listing>,
    parents: FirstParents,
}

/// A stored report found by a walk.
#[derive(Debug, Clone)]
pub struct Stored {
    pub sha: String,
    /// Its card: its folder's, or for a report stored before cards, [`card_of`] its testbed.
    pub card: String,
    pub place: Place,
    pub report: Box<Report>,
    /// First-parent steps from where the walk started.
    pub steps: usize,
}

/// The nearest stored ancestor of each card, or why there is none.
#[derive(Debug, Clone)]
pub enum Found {
    /// Nearest first, one per card.
    Reports(Vec<Stored>),
    Missing {
        reason: String,
    },
}

/// What a publish did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    Created { path: String },
    Updated { path: String },
    Unchanged { path: String },
}

/// The wait before publish attempt `attempt + 1`: the backoff doubled per
/// attempt (at most 30 s), times a factor between 0.5 and 1.5 picked from
/// `random`. Jobs that lost the same race would otherwise all wait alike and
/// meet again at the next attempt.
fn publish_wait(backoff: std::time::Duration, attempt: u32, random: u64) -> std::time::Duration {
    let base = backoff
        .saturating_mul(1 << attempt.saturating_sub(1).min(6))
        .min(std::time::Duration::from_secs(30));
    base.mul_f64(0.5 + (random % 1000) as f64 / 1000.0)
}

/// A random number, from the standard library's per-process random hash
/// keys (no dependency for one number a retry).
fn jitter() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now())
}

fn decode_b64(text: &str) -> Option<String> {
    let clean: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD.decode(clean).ok()?;
    String::from_utf8(bytes).ok()
}

/// sha → first parent, filled a page of history (100 commits) at a time.
#[derive(Default, Clone)]
struct FirstParents(HashMap<String, Option<String>>);

impl FirstParents {
    /// The first parent of `sha`: `None` for a root commit, or a commit
    /// GitHub does not list from `sha`.
    async fn of(&mut self, store: &Store<'_>, sha: &str) -> Result<Option<String>, GithubError> {
        if !self.0.contains_key(sha) {
            let path = format!("/repos/{}/commits?sha={sha}&per_page=100", store.repo);
            let page: Vec<CommitEntry> = store.client.get(Call::ReadCommits, &path).await?;
            for c in page {
                self.0.insert(
                    c.sha.to_ascii_lowercase(),
                    c.parents.first().map(|p| p.sha.to_ascii_lowercase()),
                );
            }
        }
        Ok(self.0.get(sha).cloned().flatten())
    }
}

impl Store<'_> {
    /// The file of `sha`'s report measured on `card` (see [`card_of`]).
    pub fn file_path(sha: &str, card: &str) -> String {
        Place::Card(card.into()).file("reports", sha)
    }

    /// The store's listing, asked of GitHub once per run.
    async fn listing(&self, known: &mut Known) -> Result<Listing, GithubError> {
        if let Some(l) = &known.listing {
            return Ok(l.clone());
        }
        let l = self.list().await?;
        known.listing = Some(l.clone());
        Ok(l)
    }

    /// A folder of the store through the contents API (at most 1,000
    /// entries an answer): `None` when there is no such folder.
    async fn folder(&self, dir: &str) -> Result<Option<Vec<FileEntry>>, GithubError> {
        let path = format!("/repos/{}/contents/{dir}?ref={}", self.repo, self.branch);
        self.client.get_opt::<Vec<FileEntry>>(Call::ReadBaseline, &path).await
    }

    /// The cards' folders under `dir` (`reports`, `anchors`), through the
    /// contents API, and the names of the files straight under it.
    async fn card_folders(&self, dir: &str) -> Result<(Vec<String>, Vec<String>), GithubError> {
        let (folders, files): (Vec<FileEntry>, Vec<FileEntry>) = self
            .folder(dir)
            .await?
            .unwrap_or_default()
            .into_iter()
            .partition(|e| e.kind == "dir");
        Ok((
            folders.into_iter().map(|e| e.name).filter(|n| is_card(n)).collect(),
            files.into_iter().map(|e| e.name).collect(),
        ))
    }

    /// Every stored report in one request: the branch's whole tree
    /// (docs.github.com, "Get a tree": `tree_sha` is "the SHA1 value or ref
    /// (branch or tag) name of the tree"; `recursive` lists subtrees;
    /// `truncated` past 100,000 entries or 7 MB). The contents API it
    /// replaces lists at most 1,000 files. A branch name with `/` would be
    /// read as more path segments, so such a store is listed through the
    /// contents API, as before: `reports/`, then each card's folder in it.
    async fn list(&self) -> Result<Listing, GithubError> {
        let paths: Vec<String> = if self.branch.contains('/') {
            let Some(top) = self.folder("reports").await? else {
                return Ok(Listing::Empty);
            };
            let cards: Vec<String> = top
                .iter()
                .filter(|e| e.kind == "dir" && is_card(&e.name))
                .map(|e| e.name.clone())
                .collect();
            if top.len() >= 1000 {
                return Ok(Listing::TooMany { cards });
            }
            let mut paths: Vec<String> = top.into_iter().filter(|e| e.kind != "dir").map(|e| e.name).collect();
            for card in &cards {
                let entries = self.folder(&format!("reports/{card}")).await?.unwrap_or_default();
                if entries.len() >= 1000 {
                    return Ok(Listing::TooMany { cards });
                }
                paths.extend(entries.into_iter().map(|e| format!("{card}/{}", e.name)));
            }
            paths
        } else {
            let path = format!("/repos/{}/git/trees/{}?recursive=1", self.repo, self.branch);
            match self.client.get(Call::ReadBaseline, &path).await {
                // No such branch; 409: the repository has no commit at all.
                Err(e) if matches!(e.status(), Some(404 | 409)) => return Ok(Listing::Empty),
                Err(e) => return Err(e),
                Ok(Tree { truncated: true, .. }) => {
                    return Ok(Listing::TooMany {
                        cards: self.card_folders("reports").await?.0,
                    })
                }
                Ok(Tree { tree, .. }) => tree
                    .into_iter()
                    .filter(|e| e.kind == "blob")
                    .filter_map(|e| e.path.strip_prefix("reports/").map(str::to_string))
                    .collect(),
            }
        };
        let mut map: HashMap<String, BTreeSet<Place>> = HashMap::new();
        for (sha, place) in paths.iter().filter_map(|p| stored_at(p)) {
            map.entry(sha).or_default().insert(place);
        }
        Ok(if map.is_empty() {
            Listing::Empty
        } else {
            Listing::Known(map)
        })
    }

    /// The file of a named report on `card`, an anchor
    /// (`anchors/cpu-x86_64/v1.4.0.json`): a release tag or a name `gate
    /// baseline publish --anchor` stored it under, which the spec's
    /// `drift:` budgets are measured since.
    pub fn anchor_path(name: &str, card: &str) -> String {
        Place::Card(card.into()).file("anchors", name)
    }

    /// The stored file at `file` (a path on the store's branch): its text and blob sha.
    async fn get_path(&self, file: &str) -> Result<Option<(String, String)>, GithubError> {
        let path = format!("/repos/{}/contents/{file}?ref={}", self.repo, self.branch);
        let Some(entry) = self.client.get_opt::<FileEntry>(Call::ReadBaseline, &path).await? else {
            return Ok(None);
        };
        let text = match (entry.encoding.as_deref(), entry.content.as_deref()) {
            (Some("base64"), Some(c)) if !c.is_empty() => decode_b64(c),
            _ => {
                // Files over 1 MB come without content: read the blob.
                let blob_path = format!("/repos/{}/git/blobs/{}", self.repo, entry.sha);
                let blob: Blob = self.client.get(Call::ReadBaseline, &blob_path).await?;
                decode_b64(&blob.content)
            }
        };
        let text = text.ok_or_else(|| GithubError::Decode {
            method: Method::Get.name().into(),
            path: path.clone(),
            reason: "the file's content is not base64 UTF-8".into(),
        })?;
        Ok(Some((text, entry.sha)))
    }

    /// The report of `sha` stored at `place`, if any.
    pub async fn get(&self, sha: &str, place: &Place) -> Result<Option<Report>, GithubError> {
        self.get_report(&place.file("reports", sha)).await
    }

    /// The anchor stored under `name` for each card that has one (and in
    /// the layout of before cards, `anchors/NAME.json`, with the card its
    /// testbed names), cards' folders first: a request for the `anchors/`
    /// folder, then one per card (and one for the file of before cards
    /// where the folder lists it).
    pub async fn get_anchors(&self, name: &str) -> Result<Vec<(String, Report)>, GithubError> {
        let mut out = Vec::new();
        let (cards, files) = self.card_folders("anchors").await?;
        for card in cards {
            if let Some(r) = self.get_report(&Self::anchor_path(name, &card)).await? {
                out.push((card, r));
            }
        }
        let before_cards = Place::BeforeCards.file("anchors", name);
        if !files
            .iter()
            .any(|f| before_cards.strip_prefix("anchors/") == Some(f.as_str()))
        {
            return Ok(out);
        }
        if let Some(r) = self.get_report(&before_cards).await? {
            let card = card_of(&r.testbed);
            if !out.iter().any(|(c, _)| *c == card) {
                out.push((card, r));
            }
        }
        Ok(out)
    }

    async fn get_report(&self, file: &str) -> Result<Option<Report>, GithubError> {
        match self.get_path(file).await? {
            None => Ok(None),
            Some((text, _)) => gate_report::baseline::parse(&text, file)
                .map(Some)
                .map_err(|e| GithubError::Decode {
                    method: Method::Get.name().into(),
                    path: file.to_string(),
                    reason: e.to_string(),
                }),
        }
    }

    /// Walks first parents from `start` (itself included unless
    /// `skip_start`) up to `depth` commits and returns the nearest stored
    /// report of each card the store holds, nearest first. The walk ends
    /// once every card's folder has given its nearest and the nearest report
    /// stored before cards (that layout held one card a branch: its nearest
    /// says which, and is kept where that card has no nearer one) is read.
    pub async fn find_nearest(
        &self,
        start: &str,
        skip_start: bool,
        depth: usize,
        known: &mut Known,
    ) -> Result<Found, GithubError> {
        let listing = self.listing(known).await?;
        if let Listing::Empty = listing {
            return Ok(Found::Missing {
                reason: format!(
                    "the baseline store (branch `{}`) is empty: run `gate baseline publish` on the default branch",
                    self.branch
                ),
            });
        }
        let cards = listing.cards();
        let mut before_cards_open = listing.has_before_cards();
        let mut found: Vec<Stored> = Vec::new();
        let mut cur = Some(start.to_ascii_lowercase());
        let mut steps = 0usize;
        while let Some(sha) = cur.clone() {
            if steps >= depth {
                break;
            }
            if !(skip_start && steps == 0) {
                let places: Vec<Place> = match &listing {
                    Listing::Known(map) => map.get(&sha).map(|p| p.iter().cloned().collect()).unwrap_or_default(),
                    _ => std::iter::once(Place::BeforeCards)
                        .chain(cards.iter().map(|c| Place::Card(c.clone())))
                        .collect(),
                };
                self.read_at(&sha, steps, places, &mut found, &mut before_cards_open)
                    .await?;
                let every_card = cards.iter().all(|c| found.iter().any(|f| f.card == *c));
                // Unlisted, a report stored before cards would be a probe a
                // commit: it is looked for only until every card is found.
                let probing = matches!(listing, Listing::TooMany { .. });
                if !found.is_empty() && every_card && (probing || !before_cards_open) {
                    break;
                }
            }
            cur = known.parents.of(self, &sha).await?;
            steps += 1;
        }
        if !found.is_empty() {
            return Ok(Found::Reports(found));
        }
        Ok(Found::Missing {
            reason: format!(
                "no stored report for {} or its {} nearest first-parent ancestors on branch `{}`",
                &start[..start.len().min(12)],
                depth.saturating_sub(1),
                self.branch
            ),
        })
    }

    /// Reads the reports of `sha` at `places` that a card found nearer does
    /// not make moot into `found`; the first read stored before cards closes that layout.
    async fn read_at(
        &self,
        sha: &str,
        steps: usize,
        places: Vec<Place>,
        found: &mut Vec<Stored>,
        before_cards_open: &mut bool,
    ) -> Result<(), GithubError> {
        for place in places {
            let wanted = match &place {
                Place::BeforeCards => *before_cards_open,
                Place::Card(c) => !found.iter().any(|f| f.card == *c),
            };
            if !wanted {
                continue;
            }
            let Some(report) = self.get(sha, &place).await? else {
                continue;
            };
            let card = match &place {
                Place::Card(c) => c.clone(),
                Place::BeforeCards => {
                    *before_cards_open = false;
                    card_of(&report.testbed)
                }
            };
            if !found.iter().any(|f| f.card == card) {
                found.push(Stored {
                    sha: sha.to_string(),
                    card,
                    place,
                    report: Box::new(report),
                    steps,
                });
            }
        }
        Ok(())
    }

    /// The stored reports of `card` for `sha`'s first-parent ancestors
    /// (`sha` itself excluded), nearest first: at most `max`, within `depth`
    /// commits. Where the card has no file, a report stored before cards is
    /// read instead (the history's series leaves another testbed's out). A
    /// stored file that is not a report is skipped (said on stderr).
    pub async fn older(
        &self,
        sha: &str,
        card: &str,
        depth: usize,
        max: usize,
        known: &mut Known,
    ) -> Result<Vec<(String, Report)>, GithubError> {
        let listing = self.listing(known).await?;
        if let Listing::Empty = listing {
            return Ok(Vec::new());
        }
        let own = Place::Card(card.into());
        let mut out = Vec::new();
        let mut probes = 0usize;
        let mut cur = Some(sha.to_ascii_lowercase());
        let mut steps = 0usize;
        while let Some(s) = cur.clone() {
            if steps > depth || out.len() >= max {
                break;
            }
            // Unlisted, every commit is a probe of both places: at most twice the reports asked.
            let places: Vec<&Place> = match &listing {
                Listing::Known(map) => map
                    .get(&s)
                    .and_then(|p| [&own, &Place::BeforeCards].into_iter().find(|x| p.contains(x)))
                    .into_iter()
                    .collect(),
                _ => vec![&own, &Place::BeforeCards],
            };
            if steps > 0 {
                for place in places {
                    if probes >= 2 * max {
                        break;
                    }
                    probes += 1;
                    match self.get(&s, place).await {
                        Ok(Some(r)) => {
                            out.push((s.clone(), r));
                            break;
                        }
                        Ok(None) => {}
                        Err(e @ GithubError::Decode { .. }) => {
                            crate::log(format_args!("warning: history: skipping {e}"));
                            break;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            cur = known.parents.of(self, &s).await?;
            steps += 1;
        }
        Ok(out)
    }
    /// Creates the store branch (an orphan with a README) if it is missing.
    async fn ensure_branch(&self) -> Result<(), GithubError> {
        let path = format!("/repos/{}/git/ref/heads/{}", self.repo, self.branch);
        if self.client.exists(Call::WriteBaseline, &path).await? {
            return Ok(());
        }
        let readme = "# gate baselines\n\nOne `gate` report per commit of the default branch, \
                      written by `gate baseline publish`. Do not merge this branch.\n";
        let tree: ShaOnly = self
            .client
            .post(
                Call::WriteBaseline,
                &format!("/repos/{}/git/trees", self.repo),
                &serde_json::json!({ "tree": [ { "path": "README.md", "mode": "100644", "type": "blob", "content": readme } ] }),
            )
            .await?;
        let commit: ShaOnly = self
            .client
            .post(
                Call::WriteBaseline,
                &format!("/repos/{}/git/commits", self.repo),
                &serde_json::json!({ "message": "gate: baseline store", "tree": tree.sha, "parents": [] }),
            )
            .await?;
        let made = self
            .client
            .write(
                Call::WriteBaseline,
                Method::Post,
                &format!("/repos/{}/git/refs", self.repo),
                &serde_json::json!({ "ref": format!("refs/heads/{}", self.branch), "sha": commit.sha }),
            )
            .await;
        match made {
            // A ruleset that restricts creating branches: say so, with the fix.
            Err(e) if e.rule_violation() => Err(e),
            // 422: another job created it first, which is just as good.
            Err(e) if e.status() == Some(422) => Ok(()),
            other => other,
        }
    }

    /// Stores `report_json` as the report of `sha` on `card`, retrying on
    /// concurrent updates. Another card's report of `sha` stays beside it.
    pub async fn publish(&self, sha: &str, card: &str, report_json: &str) -> Result<Published, GithubError> {
        self.publish_at(
            &Self::file_path(sha, card),
            &format!("gate: baseline for {sha} on {card}"),
            report_json,
        )
        .await
    }

    /// Stores `report_json` as the anchor `name` of `card` (a release tag,
    /// or a name the team pins), which replaces that card's anchor of that name.
    pub async fn publish_anchor(&self, name: &str, card: &str, report_json: &str) -> Result<Published, GithubError> {
        self.publish_at(
            &Self::anchor_path(name, card),
            &format!("gate: anchor {name} on {card}"),
            report_json,
        )
        .await
    }

    async fn publish_at(&self, file: &str, message: &str, report_json: &str) -> Result<Published, GithubError> {
        self.ensure_branch().await?;
        let file = file.to_string();
        let path = format!("/repos/{}/contents/{file}", self.repo);
        let content = base64::engine::general_purpose::STANDARD.encode(report_json.as_bytes());
        for attempt in 1..=PUBLISH_ATTEMPTS {
            let existing = self.get_path(&file).await?;
            if let Some((text, _)) = &existing {
                if text.trim() == report_json.trim() {
                    return Ok(Published::Unchanged { path: file });
                }
            }
            let mut body = serde_json::json!({
                "message": message,
                "content": content,
                "branch": self.branch,
            });
            if let Some((_, blob)) = &existing {
                body["sha"] = serde_json::Value::String(blob.clone());
            }
            match self.client.write(Call::WriteBaseline, Method::Put, &path, &body).await {
                Ok(()) => {
                    return Ok(if existing.is_some() {
                        Published::Updated { path: file }
                    } else {
                        Published::Created { path: file }
                    })
                }
                // A rule refuses every attempt alike: no retry.
                Err(e) if e.rule_violation() => return Err(e),
                // The branch or the file moved under us: re-read and try again.
                Err(e) if matches!(e.status(), Some(409 | 422)) => {}
                Err(e) => return Err(e),
            }
            if attempt < PUBLISH_ATTEMPTS {
                tokio::time::sleep(publish_wait(self.client.settings().backoff, attempt, jitter())).await;
            }
        }
        Err(GithubError::Conflict {
            path: file,
            attempts: PUBLISH_ATTEMPTS,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::time::Duration;

    #[test]
    fn publish_waits_grow_and_spread() {
        let b = Duration::from_millis(1000);
        // Half to one and a half times the doubled backoff.
        assert_eq!(publish_wait(b, 1, 0), Duration::from_millis(500));
        assert_eq!(publish_wait(b, 1, 999), Duration::from_millis(1499));
        assert_eq!(publish_wait(b, 3, 500), Duration::from_millis(4000));
        // At most 30 s before the spread, however many attempts.
        assert_eq!(publish_wait(b, 20, 500), Duration::from_secs(30));
        // Two jobs draw different waits (a collision is 1 in 1,000 each time).
        let waits: HashSet<u64> = (0..20).map(|_| jitter() % 1000).collect();
        assert!(waits.len() > 1, "{waits:?}");
    }
}
