//! Inventories: Ansible INI and Ansible YAML.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pipeline_engine::hosts::{read_ansible_ini, read_ansible_yaml};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let _ = if which % 2 == 0 {
        read_ansible_ini(text)
    } else {
        read_ansible_yaml(text)
    };
});
