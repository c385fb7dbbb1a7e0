// What the C++ wrapper's tests share: the e2e fixtures' directory, a work directory, and
// helpers to read a file, name a fixture repository and make a fresh data directory.
#ifndef ASSETPATCH_TEST_FIXTURES_HPP
#define ASSETPATCH_TEST_FIXTURES_HPP

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

inline std::string fixtures, work;

inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline std::string url(const std::string& repo) { return "file://" + fixtures + "/repos/" + repo + "/manifest.json"; }

inline std::filesystem::path fresh(const std::string& name) {
    auto dir = std::filesystem::path(work) / name;
    std::filesystem::remove_all(dir);
    return dir;
}

#endif
