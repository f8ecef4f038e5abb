//! Spin's HTTP routing: exact routes, `/...` wildcards, longest prefix wins.

use crate::manifest::{HttpTrigger, Route};

/// A matched route: the component and the headers Spin adds for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    pub component: String,
    /// The route as written, e.g. `/api/...`.
    pub raw_route: String,
    /// The route without its wildcard, e.g. `/api`.
    pub base: String,
    /// The part of the path after `base`.
    pub path_info: String,
}

/// Public routes in match order.
#[derive(Debug, Clone, Default)]
pub struct Router {
    routes: Vec<(String, String)>,
}

impl Router {
    /// Builds the router from the public triggers.
    pub fn new(triggers: &[HttpTrigger]) -> Self {
        let mut routes: Vec<(String, String)> = triggers
            .iter()
            .filter_map(|t| match &t.route {
                Route::Public(path) => Some((path.clone(), t.component.clone())),
                Route::Private => None,
            })
            .collect();
        // Exact routes before wildcards, longer prefixes before shorter ones.
        routes.sort_by_key(|(route, _)| (route.ends_with("/..."), std::cmp::Reverse(route.len())));
        Self { routes }
    }

    /// The component for `path`, if any public route matches.
    pub fn route(&self, path: &str) -> Option<Matched> {
        for (route, component) in &self.routes {
            if let Some(base) = route.strip_suffix("/...") {
                let base = if base.is_empty() { "" } else { base };
                if path == base || path.starts_with(&format!("{base}/")) || base.is_empty() {
                    return Some(Matched {
                        component: component.clone(),
                        raw_route: route.clone(),
                        base: base.to_owned(),
                        path_info: path[base.len()..].to_owned(),
                    });
                }
            } else if path == route || path.trim_end_matches('/') == route.trim_end_matches('/') {
                return Some(Matched { component: component.clone(), raw_route: route.clone(), base: route.clone(), path_info: String::new() });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(route: &str, component: &str) -> HttpTrigger {
        HttpTrigger { route: Route::Public(route.into()), component: component.into() }
    }

    #[test]
    fn exact_beats_wildcard_and_longer_prefix_wins() {
        let router = Router::new(&[trigger("/...", "all"), trigger("/api/...", "api"), trigger("/api/health", "health")]);
        assert_eq!(router.route("/api/health").unwrap().component, "health");
        let api = router.route("/api/members/1").unwrap();
        assert_eq!((api.component.as_str(), api.path_info.as_str()), ("api", "/members/1"));
        assert_eq!(router.route("/other").unwrap().component, "all");
        assert_eq!(router.route("/").unwrap().path_info, "/");
    }

    #[test]
    fn private_components_have_no_route() {
        let router = Router::new(&[HttpTrigger { route: Route::Private, component: "store".into() }]);
        assert_eq!(router.route("/store"), None);
    }
}
