//! `hostile-net-describe`: sleeps for a minute in `describe`, which the
//! runner calls while loading the plugin (issue #14, class 3): loading must
//! end within the call budget instead.

use pipeline_plugin_sdk::v0_1::*;

struct SleepyDescribe;

impl Plugin for SleepyDescribe {
    fn describe() -> Description {
        std::thread::sleep(std::time::Duration::from_secs(60));
        Description::new("hostile-net-describe", "0.1.0", "Sleeps in describe")
    }

    fn run(_params: &Params, _host: &Host) -> Result<Output, Error> {
        Ok(Output::new())
    }
}

export_plugin!(SleepyDescribe);
