// Tests of the C++ wrapper against the e2e fixtures: RAII, moves, exceptions carrying status
// and message, std::filesystem paths, callbacks whose exceptions cancel and are rethrown.
//   test_wrapper FIXTURES_DIR WORK_DIR        closes with "N passed, N failed"
#include "assetpatch.hpp"
#include "assetpatch_events.hpp"
#include "fixtures.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

static int passed = 0, failed = 0;

#define EXPECT(cond) do { if (!(cond)) throw std::runtime_error(std::string("line ") + std::to_string(__LINE__) + ": " #cond); } while (0)

template <class F> static void run(const char* name, F f) {
    try {
        f();
        passed++;
        std::cout << "ok - " << name << "\n";
    } catch (const std::exception& e) {
        failed++;
        std::cout << "not ok - " << name << ": " << e.what() << "\n";
    }
}

int main(int argc, char** argv) {
    if (argc != 3) { std::cerr << "usage: test_wrapper FIXTURES_DIR WORK_DIR\n"; return 2; }
    fixtures = argv[1];
    work = argv[2];
    const std::filesystem::path bundle = std::filesystem::path(fixtures) / "bundle";

    run("resolves_from_the_bundle_before_an_update", [&] {
        assetpatch::client c(fresh("a"), bundle);
        EXPECT(c.current_version() == 0);
        EXPECT(slurp(c.resolve("readme.txt")) == slurp(bundle / "readme.txt"));
    });
    run("errors_carry_status_name_and_message", [&] {
        assetpatch::client c(fresh("b"), bundle);
        try {
            c.resolve("../etc/passwd");
            EXPECT(false);
        } catch (const assetpatch::error& e) {
            EXPECT(e.status() == ASSETPATCH_ERR_ARGUMENT);
            EXPECT(std::string(e.name()) == "ASSETPATCH_ERR_ARGUMENT");
            EXPECT(std::string(e.what()).find("invalid resource name") != std::string::npos);
        }
        try { c.resolve("missing"); EXPECT(false); } catch (const assetpatch::error& e) { EXPECT(e.status() == ASSETPATCH_ERR_NOT_FOUND); }
        try { c.set("bogus", "1"); EXPECT(false); } catch (const assetpatch::error& e) { EXPECT(e.status() == ASSETPATCH_ERR_ARGUMENT); }
        try { c.update(); EXPECT(false); } catch (const assetpatch::error& e) { EXPECT(e.status() == ASSETPATCH_ERR_STATE); }
    });
    run("update_with_progress_and_check", [&] {
        assetpatch::client c(fresh("c"), bundle);
        c.set("manifest_url", url("v2")).set("variants", "@3x,@2x,");
        auto avail = c.check();
        EXPECT(avail && avail->version == 2 && avail->download_bytes > 0);
        std::vector<assetpatch::phase> phases;
        EXPECT(c.update([&](const assetpatch::progress& p) {
            if (phases.empty() || phases.back() != p.phase) phases.push_back(p.phase);
            return false;
        }));
        EXPECT(phases.front() == assetpatch::phase::check && phases.back() == assetpatch::phase::done);
        EXPECT(c.current_version() == 2);
        EXPECT(slurp(c.resolve("sub/sample.png")) == slurp(std::filesystem::path(fixtures) / "assets-v2/sub/sample@3x.png"));
        EXPECT(!c.check());
        EXPECT(!c.update());
    });
    run("outcome_events_read_in_batches_and_acknowledged", [&] {
        assetpatch::client c(fresh("events"), bundle);
        c.set("manifest_url", url("v2"));
        EXPECT(c.update());
        c.mark_good();
        auto all = assetpatch::read_events(c);
        EXPECT(all.last_seq == 5 && std::count(all.lines.begin(), all.lines.end(), '\n') == 5);
        EXPECT(all.lines.find("\"event\":\"marked_good\"") != std::string::npos);
        // A batch smaller than the oldest event still gets it, whole.
        auto one = assetpatch::read_events(c, 1);
        EXPECT(one.last_seq == 1 && one.lines == all.lines.substr(0, all.lines.find('\n') + 1));
        assetpatch::ack_events(c, 4);
        EXPECT(assetpatch::read_events(c).last_seq == 5 && assetpatch::events_info(c).pending == 1);
        try { assetpatch::ack_events(c, 9); EXPECT(false); } catch (const assetpatch::error& e) { EXPECT(e.status() == ASSETPATCH_ERR_ARGUMENT); }
        assetpatch::ack_events(c, 5);
        auto none = assetpatch::read_events(c);
        EXPECT(none.last_seq == 0 && none.lines.empty());
    });
    run("exception_in_progress_cancels_and_is_rethrown", [&] {
        assetpatch::client c(fresh("d"), bundle);
        c.set("manifest_url", url("v2"));
        struct boom {};
        bool caught = false;
        try {
            c.update([](const assetpatch::progress& p) -> bool {
                if (p.phase == assetpatch::phase::download) throw boom{};
                return false;
            });
        } catch (const boom&) {
            caught = true;
        }
        EXPECT(caught);
        EXPECT(c.current_version() == 0);
        EXPECT(c.update());  // the next attempt works (and resumes)
    });
    run("background_update_wait_and_move", [&] {
        assetpatch::client c(fresh("e"), bundle);
        c.set("manifest_url", url("v1"));
        int calls = 0;
        c.start_update([&](const assetpatch::progress&) { calls++; return false; });
        assetpatch::client moved(std::move(c));  // the callbacks live on the heap: moving is safe
        auto r = moved.wait();
        EXPECT(r && *r);
        EXPECT(calls > 0);
        EXPECT(moved.current_version() == 1);
        try { c.current_version(); EXPECT(false); } catch (const assetpatch::error& e) { EXPECT(e.status() == ASSETPATCH_ERR_STATE); }
        assetpatch::client other(fresh("f"));
        other = std::move(moved);
        EXPECT(other.current_version() == 1);
    });
    run("log_lines_reach_the_callback", [&] {
        assetpatch::client c(fresh("g"));
        int lines = 0;
        c.set_log([&](int, std::string_view msg) { if (!msg.empty()) lines++; });
        c.set("manifest_url", url("v1"));
        EXPECT(c.update());
        EXPECT(lines > 0);
    });
    run("calls_during_a_background_update_leave_its_callback_alone", [&] {
        // The background update's callback holds it inside the library until the racing calls
        // are done, so they certainly overlap it. Each must be refused (BUSY) without touching
        // the running update's callback; set_log swaps the logger while lines are written.
        assetpatch::client c(fresh("h"), bundle);
        c.set("manifest_url", url("v2"));
        std::mutex m;
        std::condition_variable cv;
        bool go = false;
        std::atomic<int> first_calls{0}, intruder_calls{0}, log_lines{0};
        c.set_log([&](int, std::string_view) { log_lines++; });
        c.start_update([&](const assetpatch::progress&) {
            first_calls++;
            std::unique_lock<std::mutex> lock(m);
            cv.wait(lock, [&] { return go; });
            return false;
        });
        while (first_calls == 0) std::this_thread::yield();
        auto intruder = [&](const assetpatch::progress&) { intruder_calls++; return false; };
        try { c.update(intruder); EXPECT(false); } catch (const assetpatch::error& e) { EXPECT(e.status() == ASSETPATCH_ERR_BUSY); }
        try { c.start_update(intruder); EXPECT(false); } catch (const assetpatch::error& e) { EXPECT(e.status() == ASSETPATCH_ERR_BUSY); }
        for (int i = 0; i < 50; i++) c.set_log([&](int, std::string_view) { log_lines++; });
        {
            std::lock_guard<std::mutex> lock(m);
            go = true;
        }
        cv.notify_all();
        auto r = c.wait();
        EXPECT(r && *r);
        EXPECT(first_calls > 1);
        EXPECT(intruder_calls == 0);
        EXPECT(c.current_version() == 2);
    });
    run("rollback_mark_good_reset_and_the_lifecycle", [&] {
        assetpatch::client c(fresh("life"), bundle);
        c.set("manifest_url", url("v1"));
        EXPECT(c.update());
        c.mark_good();
        c.set("manifest_url", url("v2"));
        EXPECT(c.update());
        auto life = c.lifecycle();
        EXPECT(life.active_version == 2 && !life.active_marked_good && life.rolled_back_from == 0);
        auto info = c.release();
        EXPECT(info && info->version == 2 && info->mandatory && std::string(info->label) == "second");
        EXPECT(c.release_notes().find("Winter event") == 0);
        EXPECT(!c.release(ASSETPATCH_RELEASE_PENDING));
        EXPECT(c.rollback() == 1);
        life = c.lifecycle();
        EXPECT(life.active_marked_good && life.bad_versions == 1 && life.rolled_back_from == 2 && life.rolled_back_to == 1);
        EXPECT(!c.update());  // version 2 is bad until a newer one is published
        EXPECT(c.rollback() == 0);
        try { c.rollback(); EXPECT(false); } catch (const assetpatch::error& e) { EXPECT(e.status() == ASSETPATCH_ERR_STATE); }
        c.reset();
        EXPECT(c.current_version() == 0 && c.lifecycle().bad_versions == 0);
        EXPECT(c.update() && c.current_version() == 2);
    });
    run("plugin_loads_and_runs", [&] {
        assetpatch::client c(fresh("plug"));
        c.set("manifest_url", url("plug")).set("allow_unsigned_plugins", "1");
        EXPECT(c.update());
        auto list = c.plugins();
        EXPECT(list.size() == 1 && std::string(list[0].name) == "fixture" && std::string(list[0].version) == "2.1");
        auto entry = c.load_plugin_as<int (*)()>("fixture");
        EXPECT(entry() == 42);
        try { c.load_plugin("fixture", "missing"); EXPECT(false); } catch (const assetpatch::error& e) { EXPECT(e.status() == ASSETPATCH_ERR_NOT_FOUND); }
    });
    run("signed_plugin_updates_to_new_code", [&] {
        assetpatch::client c(fresh("signedplug"));
        std::string key = slurp(std::filesystem::path(fixtures) / "plugin-key.pub");
        while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
        c.set("public_keys", key);
        c.set("manifest_url", url("signed1"));
        EXPECT(c.update());
        auto greet1 = c.load_plugin_as<const char* (*)()>("greeter");
        EXPECT(std::string(greet1()) == "Hello from greeter 1");
        c.set("manifest_url", url("signed2"));
        EXPECT(c.update());
        auto greet2 = c.load_plugin_as<const char* (*)()>("greeter");
        EXPECT(std::string(greet2()).find("Greetings from greeter 2") == 0);
        EXPECT(std::string(greet1()) == "Hello from greeter 1");  // loaded code stays loaded
    });
    run("library_version_matches_header", [&] { EXPECT(assetpatch::library_version() == ASSETPATCH_VERSION_STRING); });

    std::cout << passed << " passed, " << failed << " failed\n";
    return failed ? 1 : 0;
}
