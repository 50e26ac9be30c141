// The one data symbol the simulated driver exports besides CUDA's: the shim looks it up with dlsym to
// tell that it runs on the simulated driver (and reports "simulated": true).
extern "C" {
extern const char* const cumemaudit_sim_driver_version;
const char* const cumemaudit_sim_driver_version = "cumemaudit-sim 0.1.0 (CUDA 13000)";
}
