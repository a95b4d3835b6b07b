// as-add-header: the AssemblyScript twin of examples/plugins/add-header (Rust). It adds one
// response header to every response.
//
// Plugin configuration (the policy's `.config`): `name: value` (for example
// `x-served-by: edgecache`), or just a value, in which case the header name is
// `x-edge-plugin`. Empty configuration means `x-edge-plugin: as-add-header`.
//
// Built with the public SDK `@solo-io/proxy-runtime` 0.1.8 and AssemblyScript 0.14.13, both
// unmodified npm dependencies (see package.json). Build: `npm ci && npm run asbuild`, or
// examples/plugins/build.sh, which copies the result to dist/as_add_header.wasm.

// The SDK's exports (proxy_on_*, malloc, proxy_abi_version_0_2_0) must be re-exported.
export * from "@solo-io/proxy-runtime/proxy";
import {
  RootContext,
  Context,
  registerRootContext,
  FilterHeadersStatusValues,
  LogLevelValues,
  log,
  stream_context,
} from "@solo-io/proxy-runtime";
// Not re-exported by the SDK's index, but public in its runtime module.
import { get_buffer_bytes, BufferTypeValues } from "@solo-io/proxy-runtime/runtime";

const DEFAULT_NAME = "x-edge-plugin";
const DEFAULT_VALUE = "as-add-header";

class AddHeaderRoot extends RootContext {
  headerName: string = DEFAULT_NAME;
  headerValue: string = DEFAULT_VALUE;

  // WORKAROUND for a bug in @solo-io/proxy-runtime 0.1.8: the default
  // RootContext.onConfigure calls
  //   proxy_get_buffer_bytes(PluginConfiguration, 0, size, bufferPtr(), size)
  // i.e. it passes `configuration_size` where the return-size *pointer* belongs. A host that
  // follows the spec then writes the 4-byte length to guest address `size` (memory
  // corruption), and with an empty configuration the SDK reads a stale length and traps
  // (out-of-bounds at 0xfffffffc). So this override never calls super.onConfigure(); it reads
  // the configuration through the SDK's correct `get_buffer_bytes` helper, which passes
  // proper return pointers, and keeps its own copy (the base class's field is private, so
  // getConfiguration() stays "").
  onConfigure(configuration_size: u32): bool {
    let config = "";
    if (configuration_size > 0) {
      config = String.UTF8.decode(
        get_buffer_bytes(BufferTypeValues.PluginConfiguration, 0, configuration_size),
      ).trim();
    }
    if (config.length == 0) {
      this.headerName = DEFAULT_NAME;
      this.headerValue = DEFAULT_VALUE;
    } else {
      const colon = config.indexOf(":");
      if (colon >= 0) {
        this.headerName = config.substring(0, colon).trim().toLowerCase();
        this.headerValue = config.substring(colon + 1).trim();
      } else {
        this.headerName = DEFAULT_NAME;
        this.headerValue = config;
      }
    }
    if (this.headerName.length == 0) {
      log(LogLevelValues.error, "as-add-header: empty header name in configuration: " + config);
      return false; // the host refuses the plugin at load
    }
    log(LogLevelValues.info, "as-add-header configured: " + this.headerName + ": " + this.headerValue);
    return true;
  }

  createContext(context_id: u32): Context {
    return new AddHeader(context_id, this);
  }
}

class AddHeader extends Context {
  constructor(context_id: u32, root_context: AddHeaderRoot) {
    super(context_id, root_context);
  }

  onResponseHeaders(a: u32, end_of_stream: bool): FilterHeadersStatusValues {
    const root = this.root_context as AddHeaderRoot;
    stream_context.headers.response.add(root.headerName, root.headerValue);
    return FilterHeadersStatusValues.Continue;
  }
}

// A second root context in the same module: `as_stamp` adds `x-as-stamp: VM_CONFIG` to every
// response, from the VM configuration (the policy's `.vm_config`) read in onStart.
class StampRoot extends RootContext {
  stamp: string = "";

  onStart(vm_configuration_size: usize): bool {
    if (vm_configuration_size > 0) {
      this.stamp = String.UTF8.decode(
        get_buffer_bytes(BufferTypeValues.VmConfiguration, 0, vm_configuration_size as u32),
      ).trim();
    }
    return true;
  }

  // See AddHeaderRoot.onConfigure for why the SDK's default is not called.
  onConfigure(configuration_size: u32): bool {
    return true;
  }

  createContext(context_id: u32): Context {
    return new Stamp(context_id, this);
  }
}

class Stamp extends Context {
  constructor(context_id: u32, root_context: StampRoot) {
    super(context_id, root_context);
  }

  onResponseHeaders(a: u32, end_of_stream: bool): FilterHeadersStatusValues {
    const root = this.root_context as StampRoot;
    stream_context.headers.response.add("x-as-stamp", root.stamp);
    return FilterHeadersStatusValues.Continue;
  }
}

// The SDK creates the root context with the factory registered under the host property
// `plugin_root_id`: the policy's `.root_id` (`.root_id = "as_add_header";`), as Envoy's
// `root_id`. A declaration with another root id (or none) fails to load with the SDK's
// "Missing root context factory for root id".
registerRootContext((context_id: u32): RootContext => new AddHeaderRoot(context_id), "as_add_header");
registerRootContext((context_id: u32): RootContext => new StampRoot(context_id), "as_stamp");
