// Node-API stand-ins that let dlopen load dawn.node outside Node (napi_stubs.cpp).
#pragma once

namespace tern {
int napi_stubs_linked();
}  // namespace tern
