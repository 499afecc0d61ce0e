//! Communication topologies: who hands summaries to whom between rounds.
//!
//! Undirected graphs over agents `0..n`: star (agent 0 is the hub), chain, tree (binary, agent
//! `i`'s parent is `(i - 1) / 2`), random (a random spanning tree plus extra edges, mean degree
//! about 3, so the graph is always connected) and fully connected.

use serde::Serialize;

use crate::stats::Rng;

/// A communication topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Topology {
    /// Agent 0 is connected to every other agent; nobody else is connected.
    Star,
    /// `i — i+1`.
    Chain,
    /// Binary tree rooted at agent 0.
    Tree,
    /// A random connected graph (seeded).
    Random,
    /// Every pair connected.
    FullyConnected,
}

impl Topology {
    /// Every topology, in report order.
    pub const ALL: [Topology; 5] = [Topology::Star, Topology::Chain, Topology::Tree, Topology::Random, Topology::FullyConnected];

    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            Topology::Star => "star",
            Topology::Chain => "chain",
            Topology::Tree => "tree",
            Topology::Random => "random",
            Topology::FullyConnected => "fully_connected",
        }
    }

    /// Whether the paper's Table 5 averages this topology (star, chain, tree, random).
    pub fn in_table5(self) -> bool {
        !matches!(self, Topology::FullyConnected)
    }
}

/// An undirected graph as sorted adjacency lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    adj: Vec<Vec<usize>>,
}

impl Graph {
    /// Build `topology` over `n` agents; `rng` is used by [`Topology::Random`] only.
    pub fn build(topology: Topology, n: usize, rng: &mut Rng) -> Graph {
        let mut g = Graph { adj: vec![Vec::new(); n] };
        match topology {
            Topology::Star => {
                for i in 1..n {
                    g.connect(0, i);
                }
            }
            Topology::Chain => {
                for i in 1..n {
                    g.connect(i - 1, i);
                }
            }
            Topology::Tree => {
                for i in 1..n {
                    g.connect((i - 1) / 2, i);
                }
            }
            Topology::FullyConnected => {
                for i in 0..n {
                    for j in (i + 1)..n {
                        g.connect(i, j);
                    }
                }
            }
            Topology::Random => {
                // A random spanning tree (random attachment over a shuffled order) ...
                let mut order: Vec<usize> = (0..n).collect();
                rng.shuffle(&mut order);
                for k in 1..n {
                    let parent = order[rng.below(k as u64) as usize];
                    g.connect(parent, order[k]);
                }
                // ... plus extra edges so the mean degree is about 3.
                if n > 2 {
                    let pairs = (n * (n - 1) / 2) as f64;
                    let have = (n - 1) as f64;
                    let want = (1.5 * n as f64).min(pairs);
                    let p = ((want - have) / (pairs - have)).clamp(0.0, 1.0);
                    for i in 0..n {
                        for j in (i + 1)..n {
                            if !g.adj[i].contains(&j) && rng.next_f64() < p {
                                g.connect(i, j);
                            }
                        }
                    }
                }
            }
        }
        for list in &mut g.adj {
            list.sort_unstable();
        }
        g
    }

    fn connect(&mut self, a: usize, b: usize) {
        if a != b && a < self.adj.len() && b < self.adj.len() && !self.adj[a].contains(&b) {
            self.adj[a].push(b);
            self.adj[b].push(a);
        }
    }

    /// Number of agents.
    pub fn len(&self) -> usize {
        self.adj.len()
    }

    /// Whether there are no agents.
    pub fn is_empty(&self) -> bool {
        self.adj.is_empty()
    }

    /// Neighbours of `i` (sorted; empty for an unknown agent).
    pub fn neighbours(&self, i: usize) -> &[usize] {
        self.adj.get(i).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Number of edges.
    pub fn edges(&self) -> usize {
        self.adj.iter().map(Vec::len).sum::<usize>() / 2
    }

    /// Whether every agent can reach every other.
    pub fn connected(&self) -> bool {
        let n = self.adj.len();
        if n == 0 {
            return true;
        }
        let mut seen = vec![false; n];
        let mut stack = vec![0usize];
        seen[0] = true;
        while let Some(v) = stack.pop() {
            for &w in &self.adj[v] {
                if !seen[w] {
                    seen[w] = true;
                    stack.push(w);
                }
            }
        }
        seen.iter().all(|s| *s)
    }
}
