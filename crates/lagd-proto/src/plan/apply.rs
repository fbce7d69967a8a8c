//! The exact settings that apply a planned policy ([`settings`]): lagd's `--opts`, the kernel
//! bond's `BONDING_OPTS`, NetworkManager (`nmcli ... bond.options`), netplan, Open vSwitch, and
//! the switch's setting for the return path.
//!
//! A policy name that belongs to a mode is given as that mode: the `ovs-tcp` and `ovs-slb`
//! hashes are `mode=balance-tcp` and `mode=balance-slb` (lagd, Open vSwitch); the kernel bond
//! has neither, and `xmit_hash_policy=` takes no such value.

use super::policy::PlanPolicy;
use super::switch::SwitchHash;
use crate::hash::HashPolicy;

/// One way to apply the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// Where it goes (`lagd`, `BONDING_OPTS`, `nmcli`, `netplan`, `ovs-vsctl`, `switch`).
    pub target: &'static str,
    /// The setting, ready to paste (`None`: this target cannot apply the policy).
    pub value: Option<String>,
    /// Why it cannot, or what to know.
    pub note: Option<String>,
}

/// The mode the policy is, as lagd's `mode=` (and the kernel's, where it has it).
pub const fn mode_of(policy: PlanPolicy) -> &'static str {
    match policy {
        PlanPolicy::Hash(HashPolicy::OvsTcp) | PlanPolicy::Buckets(HashPolicy::OvsTcp) => {
            "balance-tcp"
        }
        PlanPolicy::Hash(HashPolicy::OvsSlb) | PlanPolicy::Buckets(HashPolicy::OvsSlb) => {
            "balance-slb"
        }
        PlanPolicy::Hash(_) | PlanPolicy::Buckets(_) => "802.3ad",
        PlanPolicy::RoundRobin => "balance-rr",
        PlanPolicy::Stripe => "stripe",
    }
}

/// The policy as the user applies it: `mode=balance-tcp` for `ovs-tcp`, `mode=balance-slb` for
/// `ovs-slb`, `xmit_hash_policy=NAME` for a kernel hash, `mode=balance-rr`, `mode=stripe`.
pub fn applied_name(policy: PlanPolicy) -> String {
    match policy {
        PlanPolicy::Hash(h) if h.kernel_value().is_some() => format!("xmit_hash_policy={h}"),
        PlanPolicy::Buckets(h) if h.kernel_value().is_some() => {
            format!("xmit_hash_policy={h} distribution=buckets")
        }
        p => format!("mode={}", mode_of(p)),
    }
}

/// lagd's options for `policy` (with LACP where the mode has a hash; `mode=balance-xor` is the
/// static alternative).
fn lagd_opts(policy: PlanPolicy) -> String {
    match policy {
        PlanPolicy::Hash(h) if h.kernel_value().is_some() => {
            format!("mode=802.3ad xmit_hash_policy={h} miimon=100")
        }
        PlanPolicy::Buckets(h) if h.kernel_value().is_some() => {
            format!("mode=802.3ad xmit_hash_policy={h} distribution=buckets miimon=100")
        }
        p => format!("mode={} miimon=100", mode_of(p)),
    }
}

/// The settings that apply `policy` on a bond of `members` (names `eth1`, `eth2`... as
/// placeholders), and, when the switch's return path was modelled, its best hash with the
/// imbalance it gives.
pub fn settings(
    policy: PlanPolicy,
    members: usize,
    best_return: Option<(SwitchHash, f64)>,
) -> Vec<Setting> {
    let names: Vec<String> = (1..=members.max(1)).map(|i| format!("eth{i}")).collect();
    let opts = lagd_opts(policy);
    let mut out = vec![Setting {
        target: "lagd",
        value: Some(format!(
            "lagd --bond bond0 --members {} --opts \"{opts}\"",
            names.join(",")
        )),
        note: match policy {
            PlanPolicy::Stripe => Some("needs lagd in mode=stripe at both ends".into()),
            PlanPolicy::Hash(h) if h.kernel_value().is_some() => {
                Some("mode=balance-xor instead of 802.3ad for a static LAG".into())
            }
            _ => None,
        },
    }];
    // The kernel bond: balance-rr, and the kernel hashes in 802.3ad.
    let kernel = match policy {
        PlanPolicy::Hash(h) => h.kernel_value().map(|_| (Some(h), "802.3ad")),
        PlanPolicy::RoundRobin => Some((None, "balance-rr")),
        _ => None,
    };
    let why_not = match policy {
        PlanPolicy::Hash(HashPolicy::OvsTcp) => {
            "the kernel bond has no balance-tcp (it is an Open vSwitch and lagd mode; the nearest kernel policy is xmit_hash_policy=layer3+4)"
        }
        PlanPolicy::Hash(HashPolicy::OvsSlb) => {
            "the kernel bond has no balance-slb (it is an Open vSwitch and lagd mode; the nearest kernel policy is xmit_hash_policy=vlan+srcmac)"
        }
        PlanPolicy::Buckets(_) => "the kernel bond has no bucket table: lagd or Open vSwitch only",
        PlanPolicy::Stripe => "stripe is lagd's own mode",
        _ => "",
    };
    match kernel {
        Some((hash, mode)) => {
            let mut kv = vec![format!("mode={mode}")];
            if let Some(h) = hash {
                kv.push(format!("xmit_hash_policy={h}"));
            }
            kv.push("miimon=100".into());
            out.push(Setting {
                target: "BONDING_OPTS",
                value: Some(format!("BONDING_OPTS=\"{}\"", kv.join(" "))),
                note: None,
            });
            out.push(Setting {
                target: "nmcli",
                value: Some(format!(
                    "nmcli connection modify bond0 bond.options \"{}\"",
                    kv.join(",")
                )),
                note: None,
            });
            // netplan's transmit-hash-policy knows layer2, layer2+3, layer3+4, encap2+3 and
            // encap3+4.
            let netplan_ok = !matches!(hash, Some(HashPolicy::VlanSrcMac));
            let mut np = format!(
                "bonds: {{bond0: {{interfaces: [{}], parameters: {{mode: {mode}",
                names.join(", ")
            );
            if let Some(h) = hash {
                np.push_str(&format!(", transmit-hash-policy: {h}"));
            }
            np.push_str(", mii-monitor-interval: 100}}}");
            out.push(Setting {
                target: "netplan",
                value: netplan_ok.then_some(np),
                note: (!netplan_ok).then(|| {
                    "netplan's transmit-hash-policy has no vlan+srcmac: set it with BONDING_OPTS or nmcli"
                        .into()
                }),
            });
        }
        None => {
            for target in ["BONDING_OPTS", "nmcli", "netplan"] {
                out.push(Setting {
                    target,
                    value: None,
                    note: Some(why_not.into()),
                });
            }
        }
    }
    if let PlanPolicy::Hash(HashPolicy::OvsTcp | HashPolicy::OvsSlb)
    | PlanPolicy::Buckets(HashPolicy::OvsTcp | HashPolicy::OvsSlb) = policy
    {
        let mode = mode_of(policy);
        let lacp = if mode == "balance-tcp" {
            " lacp=active"
        } else {
            ""
        };
        out.push(Setting {
            target: "ovs-vsctl",
            value: Some(format!(
                "ovs-vsctl add-bond br0 bond0 {} bond_mode={mode}{lacp}",
                names.join(" ")
            )),
            note: None,
        });
    }
    if let Some((hash, imbalance)) = best_return {
        out.push(Setting {
            target: "switch",
            value: Some(format!("load-balance {}", hash.name())),
            note: Some(format!(
                "return path: the best modelled switch hash for this traffic, imbalance {:.2}; the command's form is the vendor's",
                imbalance
            )),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(s: &'a [Setting], target: &str) -> &'a Setting {
        s.iter().find(|x| x.target == target).unwrap()
    }

    #[test]
    fn kernel_hash_has_every_form() {
        let s = settings(PlanPolicy::Hash(HashPolicy::Layer34), 2, None);
        assert_eq!(
            get(&s, "lagd").value.as_deref(),
            Some(
                "lagd --bond bond0 --members eth1,eth2 --opts \"mode=802.3ad xmit_hash_policy=layer3+4 miimon=100\""
            )
        );
        assert_eq!(
            get(&s, "BONDING_OPTS").value.as_deref(),
            Some("BONDING_OPTS=\"mode=802.3ad xmit_hash_policy=layer3+4 miimon=100\"")
        );
        assert!(
            get(&s, "nmcli")
                .value
                .as_deref()
                .unwrap()
                .ends_with("bond.options \"mode=802.3ad,xmit_hash_policy=layer3+4,miimon=100\"")
        );
        assert!(
            get(&s, "netplan")
                .value
                .as_deref()
                .unwrap()
                .contains("transmit-hash-policy: layer3+4")
        );
        assert!(!s.iter().any(|x| x.target == "switch"));
    }

    #[test]
    fn ovs_hashes_are_modes() {
        assert_eq!(
            applied_name(PlanPolicy::Hash(HashPolicy::OvsTcp)),
            "mode=balance-tcp"
        );
        assert_eq!(
            applied_name(PlanPolicy::Hash(HashPolicy::OvsSlb)),
            "mode=balance-slb"
        );
        let s = settings(PlanPolicy::Hash(HashPolicy::OvsTcp), 3, None);
        assert!(
            get(&s, "lagd")
                .value
                .as_deref()
                .unwrap()
                .contains("--opts \"mode=balance-tcp miimon=100\"")
        );
        assert!(
            !s.iter()
                .any(|x| x.value.as_deref().unwrap_or("").contains("ovs-tcp"))
        );
        let k = get(&s, "BONDING_OPTS");
        assert!(k.value.is_none());
        assert!(k.note.as_deref().unwrap().contains("no balance-tcp"));
        assert!(
            get(&s, "ovs-vsctl")
                .value
                .as_deref()
                .unwrap()
                .contains("bond_mode=balance-tcp lacp=active")
        );
        // vlan+srcmac: kernel yes, netplan no.
        let s = settings(PlanPolicy::Hash(HashPolicy::VlanSrcMac), 2, None);
        assert!(get(&s, "BONDING_OPTS").value.is_some());
        assert!(get(&s, "netplan").value.is_none());
    }
}
