// program: what the test programs share with the examples — stopping with the program's name, the
// properties of pinned device memory, and the read-write access a mapping needs — written once, in
// examples/example_args.hpp, and named here as the tests' own (cumemaudit::program).
#pragma once

#include "../../examples/example_args.hpp"

namespace cumemaudit::program {

using example::device_prop;
using example::die;
using example::read_write;

}  // namespace cumemaudit::program
