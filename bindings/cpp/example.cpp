// assetpatch C++ example: update with a progress line, then print resolved paths.
//   assetpatch-example-cpp DATA_DIR BUNDLE_DIR MANIFEST_URL [NAME...]
#include "assetpatch.hpp"

#include <iostream>

int main(int argc, char** argv) {
    if (argc < 4) {
        std::cerr << "usage: " << argv[0] << " DATA_DIR BUNDLE_DIR MANIFEST_URL [NAME...]\n";
        return 1;
    }
    try {
        assetpatch::client c(argv[1], std::filesystem::path(argv[2]));
        c.set("manifest_url", argv[3]).set("variants", "@3x,@2x,");
        c.set_log([](int level, std::string_view msg) { if (level >= 2) std::cerr << "[assetpatch] " << msg << "\n"; });
        bool installed = c.update([](const assetpatch::progress& p) {
            if (p.bytes_total) std::cerr << "\rphase " << static_cast<int>(p.phase) << ": " << p.bytes_done << "/" << p.bytes_total << "   ";
            return false;
        });
        std::cerr << "\n" << (installed ? "updated" : "no update") << "; version " << c.current_version() << "\n";
        for (int i = 4; i < argc; i++) {
            try {
                std::cout << argv[i] << " -> " << c.resolve(argv[i]).string() << "\n";
            } catch (const assetpatch::error& e) {
                std::cout << argv[i] << " -> " << e.name() << "\n";
            }
        }
    } catch (const assetpatch::error& e) {
        std::cerr << e.what() << "\n";
        return 3;
    }
    return 0;
}
